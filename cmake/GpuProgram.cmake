# gpualloc_gpu_program(<name> SOURCES <.cu...> [FLAGS <flags...>] [DEPENDS <files...>])
#
# Compiles an unmodified CUDA program with gpualloc-clang++ into
# <current binary dir>/<name>, the way a user would, rebuilt whenever the
# sources or any part of the toolchain (wrapper, pass, runtime, libgpualloc)
# changes.
function(gpualloc_gpu_program name)
  cmake_parse_arguments(ARG "" "" "SOURCES;FLAGS;DEPENDS" ${ARGN})
  list(TRANSFORM ARG_SOURCES PREPEND ${CMAKE_CURRENT_SOURCE_DIR}/)
  list(TRANSFORM ARG_DEPENDS PREPEND ${CMAKE_CURRENT_SOURCE_DIR}/)
  set(output ${CMAKE_CURRENT_BINARY_DIR}/${name})
  add_custom_command(
    OUTPUT ${output}
    COMMAND ${GPUALLOC_WRAPPER} -O2 -std=c++20 -I${CMAKE_CURRENT_SOURCE_DIR} ${ARG_FLAGS} ${ARG_SOURCES} -o ${output}
    DEPENDS ${ARG_SOURCES} ${ARG_DEPENDS} ${GPUALLOC_TOOLCHAIN_FILES} ${GPUALLOC_TOOLCHAIN_TARGETS}
    COMMENT "gpualloc-clang++ ${name}"
    VERBATIM)
  add_custom_target(${name}_program ALL DEPENDS ${output})
endfunction()
