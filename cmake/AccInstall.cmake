# Install libacc with a CMake package so user projects can find_package(acc CONFIG REQUIRED).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

install(TARGETS acc EXPORT accTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY core/acc DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} FILES_MATCHING PATTERN "*.h")
install(EXPORT accTargets NAMESPACE acc:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/acc)

configure_package_config_file(cmake/accConfig.cmake.in ${PROJECT_BINARY_DIR}/accConfig.cmake
                              INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/acc)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/accConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/accConfig.cmake ${PROJECT_BINARY_DIR}/accConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/acc)
