# Install rules: the kvtier binary, and the headers an out-of-tree connector plugin builds
# against (docs/connectors/plugins.md). Headers keep the include paths they use among themselves
# ("connectors/connector.h" includes "common/status.h"), so a plugin compiles with
# -I<prefix>/include/kvtier. Only header-only code is installed: no kvtier library is, and a
# plugin links nothing of kvtier's.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

install(TARGETS kvtier RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

set(KVT_PLUGIN_HEADER_DIR ${CMAKE_INSTALL_INCLUDEDIR}/kvtier)
install(FILES src/connectors/connector.h src/connectors/connector_base.h
              src/connectors/plugin_abi.h
        DESTINATION ${KVT_PLUGIN_HEADER_DIR}/connectors)
install(FILES src/common/status.h src/common/buffer_span.h src/common/thread_priority.h
        DESTINATION ${KVT_PLUGIN_HEADER_DIR}/common)

# find_package(kvtier) for plugins: the target kvtier::connector_headers and KVTIER_INCLUDE_DIR.
# Headers only, so the package is architecture-independent and lives under share/.
set(KVT_CMAKE_DIR ${CMAKE_INSTALL_DATADIR}/cmake/kvtier)
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/kvtierConfig.cmake.in
                              ${CMAKE_BINARY_DIR}/kvtierConfig.cmake
                              INSTALL_DESTINATION ${KVT_CMAKE_DIR}
                              PATH_VARS KVT_PLUGIN_HEADER_DIR)
# The package version is kvtier's; whether a plugin fits is decided by the connector ABI version,
# which kvtier checks when it loads the plugin.
write_basic_package_version_file(${CMAKE_BINARY_DIR}/kvtierConfigVersion.cmake
                                 VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion
                                 ARCH_INDEPENDENT)
install(FILES ${CMAKE_BINARY_DIR}/kvtierConfig.cmake ${CMAKE_BINARY_DIR}/kvtierConfigVersion.cmake
        DESTINATION ${KVT_CMAKE_DIR})
