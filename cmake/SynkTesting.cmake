# synk_add_unit_tests(LIB DIR): one GoogleTest executable per DIR/*_test.cpp, linked to LIB and
# registered with CTest. One executable per file keeps builds of unrelated tests independent.
function(synk_add_unit_tests lib dir)
  file(GLOB tests CONFIGURE_DEPENDS ${dir}/*_test.cpp)
  foreach(src ${tests})
    get_filename_component(name ${src} NAME_WE)
    get_filename_component(prefix ${dir} NAME)
    set(target ${prefix}_${name})
    add_executable(${target} ${src})
    target_link_libraries(${target} PRIVATE ${lib} GTest::gtest GTest::gtest_main)
    target_compile_definitions(${target} PRIVATE SYNK_SOURCE_DIR="${CMAKE_SOURCE_DIR}"
                               SYNK_BINARY_DIR="${CMAKE_BINARY_DIR}")
    gtest_discover_tests(${target} DISCOVERY_TIMEOUT 120 PROPERTIES TIMEOUT 600)
  endforeach()
endfunction()
