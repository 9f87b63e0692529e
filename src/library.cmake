# libdiffnet.so: the inference library for other programs (`find_package(diffnet)` -> diffnet::diffnet,
# cmake/packaging.cmake). It holds the modules common, io, ops, model, data and eval whole (document
# readers, the model, Predictor, PredictionWriter, metrics), links everything but LibTorch privately, and
# installs the headers of those modules. The CLI, tests and the Python module keep the static archives.
# Not made in CUDA or sanitizer builds (never linked or tested there: the GPU check does not need it).
if(TARGET diffnet_eval AND TARGET diffnet_model AND TARGET diffnet_data AND NOT DIFFNET_FUZZ AND NOT DIFFNET_CUDA
   AND NOT DIFFNET_SANITIZE)
  set(_lib_archives diffnet_eval diffnet_data diffnet_model diffnet_ops diffnet_io diffnet_common)
  add_library(diffnet_shared SHARED ${CMAKE_CURRENT_LIST_DIR}/library.cpp)
  set(_whole "")
  foreach(a ${_lib_archives})
    list(APPEND _whole "$<TARGET_FILE:${a}>")
  endforeach()
  # Every object of the archives goes in (not only those library.cpp would pull); the archives are then
  # linked again as targets for their own dependencies (libjpeg, qpdf, LMDB, ...). --no-undefined: the
  # library must be complete.
  target_link_libraries(diffnet_shared PRIVATE -Wl,--whole-archive ${_whole} -Wl,--no-whole-archive
                        ${_lib_archives} -Wl,--no-undefined)
  target_link_libraries(diffnet_shared PUBLIC torch nlohmann_json::nlohmann_json)
  target_include_directories(diffnet_shared PUBLIC $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
                             $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  set_target_properties(diffnet_shared PROPERTIES OUTPUT_NAME diffnet EXPORT_NAME diffnet
                        VERSION ${PROJECT_VERSION} SOVERSION ${PROJECT_VERSION_MAJOR}.${PROJECT_VERSION_MINOR})
  install(TARGETS diffnet_shared EXPORT diffnetTargets LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
  # The headers of the modules inside the library (train, dist, synth, serve are not in it).
  foreach(h calibration common config data dataset dct device document eval image_io metrics model predict
            prediction_writer regions report rng safetensors version zero_sum)
    install(FILES ${PROJECT_SOURCE_DIR}/include/diffnet/${h}.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/diffnet)
  endforeach()
endif()
