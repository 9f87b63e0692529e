# Corpus replay of the fuzz targets (fuzz/, docs/fuzz.md): the same target files as `make fuzz`, built
# with the normal compiler, run once over fuzz/corpus/<target>/ and fuzz/crashes/<target>/.
if(TARGET diffnet_data AND TARGET diffnet_serve_request)
  file(GLOB fuzz_target_sources CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/fuzz/fuzz_*.cpp)
  add_executable(test_fuzz_replay ${PROJECT_SOURCE_DIR}/fuzz/replay_main.cpp ${fuzz_target_sources})
  target_include_directories(test_fuzz_replay PRIVATE ${PROJECT_SOURCE_DIR})
  target_compile_definitions(test_fuzz_replay PRIVATE DIFFNET_FUZZ_DIR="${PROJECT_SOURCE_DIR}/fuzz")
  target_link_libraries(test_fuzz_replay PRIVATE diffnet_data diffnet_serve_request)
  add_test(NAME fuzz_replay COMMAND test_fuzz_replay)
  set_tests_properties(fuzz_replay PROPERTIES ENVIRONMENT "DIFFNET_THREADS=1;OMP_WAIT_POLICY=PASSIVE" TIMEOUT 120)
endif()
