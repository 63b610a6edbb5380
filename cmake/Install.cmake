# Installation: the client library as a CMake package (find_package(rsc), target
# rsc::client) and a pkg-config file (rsc.pc), plus the coordinator and CLI binaries.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)
if(TARGET rsc_client)
  install(TARGETS rsc_client rsc_redis_io rsc_core EXPORT rscTargets
          ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
          LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/rsc DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
  install(EXPORT rscTargets NAMESPACE rsc:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/rsc)
  configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/rscConfig.cmake.in
    ${PROJECT_BINARY_DIR}/rscConfig.cmake INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/rsc)
  write_basic_package_version_file(${PROJECT_BINARY_DIR}/rscConfigVersion.cmake
    COMPATIBILITY SameMajorVersion)
  install(FILES ${PROJECT_BINARY_DIR}/rscConfig.cmake ${PROJECT_BINARY_DIR}/rscConfigVersion.cmake
          DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/rsc)
  configure_file(${PROJECT_SOURCE_DIR}/cmake/rsc.pc.in ${PROJECT_BINARY_DIR}/rsc.pc @ONLY)
  install(FILES ${PROJECT_BINARY_DIR}/rsc.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
endif()
foreach(bin rsc-coordinator rsc)
  if(TARGET ${bin})
    install(TARGETS ${bin} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
  endif()
endforeach()
