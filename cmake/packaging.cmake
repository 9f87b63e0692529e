# Installing and packaging (README "Install"):
# - `cmake --install <build> [--prefix P]`: P/bin/diffnet, P/lib/libdiffnet.so + P/include/diffnet/ and the
#   CMake package P/lib/cmake/diffnet/ (src/library.cmake), the Python module (python/), and the default
#   weights in P/share/diffnet/weights/, where the binary, the library and the module look for them;
# - `make deb` (cpack -G DEB): the same under /usr as a .deb whose dependencies dpkg-shlibdeps computes.
include(CMakePackageConfigHelpers)
if(TARGET diffnet_shared)
  set(_cmake_dir ${CMAKE_INSTALL_LIBDIR}/cmake/diffnet)
  install(EXPORT diffnetTargets NAMESPACE diffnet:: DESTINATION ${_cmake_dir})
  configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/diffnetConfig.cmake.in
    ${PROJECT_BINARY_DIR}/diffnetConfig.cmake INSTALL_DESTINATION ${_cmake_dir})
  write_basic_package_version_file(${PROJECT_BINARY_DIR}/diffnetConfigVersion.cmake
    COMPATIBILITY SameMinorVersion)
  install(FILES ${PROJECT_BINARY_DIR}/diffnetConfig.cmake ${PROJECT_BINARY_DIR}/diffnetConfigVersion.cmake
          DESTINATION ${_cmake_dir})
endif()

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME diffnet)
set(CPACK_PACKAGE_VENDOR "DiffNet developers")
set(CPACK_PACKAGE_CONTACT "DiffNet developers <diffnet@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "Document tampering localisation (DiffNet, C++/LibTorch): CLI, service, library, Python module")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_PACKAGE_FILE_NAME diffnet_${PROJECT_VERSION}_amd64)
set(CPACK_DEBIAN_PACKAGE_ARCHITECTURE amd64)
set(CPACK_DEBIAN_PACKAGE_SECTION science)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# dpkg-shlibdeps finds libdiffnet.so inside the package itself.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS ${PROJECT_BINARY_DIR})
# What no shared-library dependency names: the OpenMP BLAS that LibTorch should load (the measured
# configuration), and the fonts `diffnet synth` renders documents with.
set(CPACK_DEBIAN_PACKAGE_DEPENDS "libopenblas0-openmp")
# The Python module imports numpy; building against libdiffnet needs the LibTorch and JSON headers.
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "python3-numpy, libtorch-dev, nlohmann-json3-dev")
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "fonts-dejavu-core, fonts-liberation2, fonts-noto-mono, fonts-freefont-ttf, fonts-urw-base35")
set(CPACK_DEBIAN_COMPRESSION_TYPE gzip)
set(CPACK_STRIP_FILES ON)
include(CPack)
