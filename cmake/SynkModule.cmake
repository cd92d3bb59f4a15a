# synk_add_module(): compile a .synk file ahead of time in a CMake build and get a target to link.
#
#   find_package(synk REQUIRED)              # or, inside synk's own build, nothing to do
#   synk_add_module(model model.synk)        # [NAME ns] [TARGET_CPU cpu] [CUDA_ARCH 80,90] [FUNCTIONS f g ...]
#   add_executable(app main.cpp)             # main.cpp: #include "model.h", model::f()(...)
#   target_link_libraries(app PRIVATE model)
#
# At build time synkc writes <binary dir>/synk_modules/<target>/lib<target>_synk.a (the kernels
# and the host stub, without synk's own libraries) and <NAME>.h, the header of typed entry points
# (NAME: the file's stem made a C identifier, unless given). The .npy files of the module's load()
# initialisers are built into the archive. The command depends on the .synk file, on synkc and
# (through synkc's depfile) on those .npy files, so editing any of them re-runs it. <target> is an INTERFACE library carrying the
# archive, the header's directory and synk::compiler_core (the LLVM-free part of synk).
# TARGET_CPU: the CPU the kernels are compiled for (default: the building machine's).
# CUDA_ARCH: synkc's --cuda-arch, the GPU architectures built in ("none": CPU only; default: sm_80
# and sm_90 plus PTX when NVRTC is available at build time).
# FUNCTIONS: only these functions get entry points (default: all).
include_guard(GLOBAL)

function(synk_add_module target file)
  cmake_parse_arguments(PARSE_ARGV 2 SYNK "" "NAME;TARGET_CPU;CUDA_ARCH" "FUNCTIONS")
  if(SYNK_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "synk_add_module(${target}): unknown arguments: ${SYNK_UNPARSED_ARGUMENTS} "
                        "(expected: NAME <namespace>, TARGET_CPU <cpu>, CUDA_ARCH <list>, FUNCTIONS <name>...)")
  endif()
  if(NOT TARGET synk::synkc OR NOT TARGET synk::compiler_core)
    message(FATAL_ERROR "synk_add_module(${target}): synk::synkc / synk::compiler_core are not defined "
                        "(call find_package(synk REQUIRED) first)")
  endif()
  get_filename_component(source "${file}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
  if(NOT EXISTS "${source}")
    message(FATAL_ERROR "synk_add_module(${target}): no such file: ${source}")
  endif()
  if(SYNK_NAME)
    set(name "${SYNK_NAME}")
  else()
    get_filename_component(stem "${source}" NAME_WE)
    string(MAKE_C_IDENTIFIER "${stem}" name)
  endif()

  set(dir "${CMAKE_CURRENT_BINARY_DIR}/synk_modules/${target}")
  set(archive "${dir}/lib${target}_synk.a")
  set(header "${dir}/${name}.h")
  set(options --name "${name}")
  if(SYNK_TARGET_CPU)
    list(APPEND options --target-cpu "${SYNK_TARGET_CPU}")
  endif()
  if(SYNK_CUDA_ARCH)
    list(APPEND options --cuda-arch "${SYNK_CUDA_ARCH}")
  endif()
  foreach(fn IN LISTS SYNK_FUNCTIONS)
    list(APPEND options --fn "${fn}")
  endforeach()

  file(MAKE_DIRECTORY "${dir}")
  add_custom_command(
    OUTPUT "${archive}" "${header}"
    COMMAND synk::synkc "${source}" -o "${archive}" --header "${header}" --no-bundle --depfile "${archive}.d"
            ${options}
    DEPENDS "${source}" "$<TARGET_FILE:synk::synkc>"
    DEPFILE "${archive}.d"
    COMMENT "synkc: compiling ${file} (module ${name})"
    VERBATIM)
  add_custom_target(${target}_synkc DEPENDS "${archive}" "${header}")

  add_library(${target} INTERFACE)
  target_link_libraries(${target} INTERFACE "${archive}" synk::compiler_core)
  target_include_directories(${target} INTERFACE "${dir}")
  # An interface library's dependencies are followed by whatever links it.
  add_dependencies(${target} ${target}_synkc)
endfunction()
