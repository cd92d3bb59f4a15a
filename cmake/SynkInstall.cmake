# Installing synk: the exported targets and the package files (lib/cmake/synk), and the headers
# under <prefix>/include/synk, laid out as in the source tree (that directory is the include root
# of every exported target, so <synk/synk.h> and the one-release forwarding headers at the old
# paths, such as "runtime/synk.h" and "compiler/synk_jit.h", both resolve). Tests' helpers and
# the compiler's internals are not installed.
include(CMakePackageConfigHelpers)
install(EXPORT synkTargets NAMESPACE synk:: DESTINATION lib/cmake/synk FILE synkTargets.cmake)
configure_package_config_file(${CMAKE_SOURCE_DIR}/cmake/synkConfig.cmake.in
  ${CMAKE_BINARY_DIR}/synkConfig.cmake INSTALL_DESTINATION lib/cmake/synk)
write_basic_package_version_file(${CMAKE_BINARY_DIR}/synkConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/synkConfig.cmake ${CMAKE_BINARY_DIR}/synkConfigVersion.cmake
              ${CMAKE_SOURCE_DIR}/cmake/SynkModule.cmake
        DESTINATION lib/cmake/synk)
foreach(dir base gpu ir dsl runtime compiler synk)
  install(DIRECTORY ${CMAKE_SOURCE_DIR}/${dir}/ DESTINATION include/synk/${dir}
          FILES_MATCHING PATTERN "*.h"
          PATTERN "*test*" EXCLUDE PATTERN "testing.h" EXCLUDE PATTERN "emulator.h" EXCLUDE)
endforeach()

# The same package in the build tree, so a project can use synk without installing it:
# find_package(synk) with -Dsynk_DIR=<this build directory> (its headers are then the source tree's).
export(EXPORT synkTargets NAMESPACE synk:: FILE ${CMAKE_BINARY_DIR}/synkTargets.cmake)
configure_file(${CMAKE_SOURCE_DIR}/cmake/SynkModule.cmake ${CMAKE_BINARY_DIR}/SynkModule.cmake COPYONLY)
