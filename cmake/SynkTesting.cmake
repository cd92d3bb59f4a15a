# synk_add_unit_tests(DIR LIBS...): one GoogleTest executable per DIR/*_test.cpp, linked to LIBS
# and registered with CTest, named <folder path with '_'>_<file stem> (compiler/cpu/x_test.cpp:
# compiler_cpu_x_test). One executable per file keeps builds of unrelated tests independent.
# Tests are leaves of the layering: they may link whatever they exercise.
function(synk_add_unit_tests dir)
  file(GLOB tests CONFIGURE_DEPENDS ${dir}/*_test.cpp)
  file(RELATIVE_PATH rel ${CMAKE_SOURCE_DIR} ${dir})
  string(REPLACE "/" "_" prefix "${rel}")
  foreach(src ${tests})
    get_filename_component(name ${src} NAME_WE)
    set(target ${prefix}_${name})
    add_executable(${target} ${src})
    target_link_libraries(${target} PRIVATE ${ARGN} GTest::gtest GTest::gtest_main)
    target_compile_definitions(${target} PRIVATE SYNK_SOURCE_DIR="${CMAKE_SOURCE_DIR}"
                               SYNK_BINARY_DIR="${CMAKE_BINARY_DIR}")
    gtest_discover_tests(${target} DISCOVERY_TIMEOUT 120 PROPERTIES TIMEOUT 600)
  endforeach()
endfunction()

# synk_library(TARGET EXPORT_NAME SOURCES...): a static library of synk, installed and exported
# as synk::<EXPORT_NAME>, with the source tree (build) or <prefix>/include/synk (installed) as
# its include root.
function(synk_library target export_name)
  add_library(${target} STATIC ${ARGN})
  target_include_directories(${target} PUBLIC $<BUILD_INTERFACE:${CMAKE_SOURCE_DIR}>
                                              $<INSTALL_INTERFACE:include/synk>)
  # synk's headers use C++20 (std::span, designated initialisers): every consumer needs it too.
  target_compile_features(${target} PUBLIC cxx_std_20)
  set_target_properties(${target} PROPERTIES EXPORT_NAME ${export_name})
  install(TARGETS ${target} EXPORT synkTargets ARCHIVE DESTINATION lib)
endfunction()

# synk_folder(TARGET SOURCES files... [TESTS libs...]): a folder of one of synk's libraries adds
# its sources (relative to the folder) to TARGET and, when tests are built, its *_test.cpp files
# linked to the TESTS libraries (synk_add_unit_tests).
function(synk_folder target)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "" "SOURCES;TESTS")
  list(TRANSFORM arg_SOURCES PREPEND "${CMAKE_CURRENT_SOURCE_DIR}/")
  target_sources(${target} PRIVATE ${arg_SOURCES})
  if(SYNK_BUILD_TESTS AND arg_TESTS)
    synk_add_unit_tests(${CMAKE_CURRENT_SOURCE_DIR} ${arg_TESTS})
  endif()
endfunction()
