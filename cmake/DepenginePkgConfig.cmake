# pkg-config files, for programs that do not build with CMake:
#
#   g++ -std=c++20 main.cc $(pkg-config --cflags --libs depengine)
#   g++ -std=c++20 main.cc $(pkg-config --cflags --libs depengine-ops)
#
# depengine.pc is the engine (depengine::depengine); depengine-ops.pc the
# operator layer (depengine::ops), installed when it was built. They say
# what the CMake targets' usage requirements say: the archives are static,
# so Libs lists everything they need at link time (threads, the sanitizer
# runtime of a sanitizer build, the static CUDA runtime of a GPU build,
# OpenBLAS for the operator layer). Cflags has no -std: the headers need
# C++20, which the compiler line must ask for (as above).
#
# Relocatable: prefix is found from the file's own place (${pcfiledir}),
# so an installed tree can be moved, as the CMake package can
# (tests/install/run_install_test.cmake moves it before using it).
# Written per configuration (a Debug build's archive has the `d` postfix).

if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}" OR IS_ABSOLUTE "${CMAKE_INSTALL_INCLUDEDIR}")
  set(_depengine_pc_prefix "${CMAKE_INSTALL_PREFIX}")
else()
  file(RELATIVE_PATH _depengine_pc_up "/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/")
  string(REGEX REPLACE "/$" "" _depengine_pc_up "${_depengine_pc_up}")
  set(_depengine_pc_prefix "\${pcfiledir}/${_depengine_pc_up}")
endif()
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
  set(_depengine_pc_libdir "${CMAKE_INSTALL_LIBDIR}")
else()
  set(_depengine_pc_libdir "\${prefix}/${CMAKE_INSTALL_LIBDIR}")
endif()
if(IS_ABSOLUTE "${CMAKE_INSTALL_INCLUDEDIR}")
  set(_depengine_pc_includedir "${CMAKE_INSTALL_INCLUDEDIR}")
else()
  set(_depengine_pc_includedir "\${prefix}/${CMAKE_INSTALL_INCLUDEDIR}")
endif()

# What a link of the static engine needs besides the archive itself.
set(_depengine_pc_engine_libs "-pthread")
if(DEPENGINE_SANITIZE)
  string(APPEND _depengine_pc_engine_libs " -fsanitize=${DEPENGINE_SANITIZE}")
endif()
if(DEPENGINE_HAVE_CUDA)
  string(APPEND _depengine_pc_engine_libs " $<TARGET_LINKER_FILE:CUDA::cudart_static> -ldl -lrt")
endif()

set(_depengine_pc_dir ${CMAKE_CURRENT_BINARY_DIR}/pkgconfig/$<CONFIG>)
set(_depengine_pc_head "prefix=${_depengine_pc_prefix}
libdir=${_depengine_pc_libdir}
includedir=${_depengine_pc_includedir}
")

file(GENERATE OUTPUT ${_depengine_pc_dir}/depengine.pc CONTENT "${_depengine_pc_head}
Name: depengine
Description: Dependency engine: runs a serial program's functions in parallel by the data they read and write (MXNet's engine API)
Version: ${PROJECT_VERSION}
Cflags: -I\${includedir}
Libs: \${libdir}/$<TARGET_LINKER_FILE_NAME:depengine> ${_depengine_pc_engine_libs}
")
install(FILES ${_depengine_pc_dir}/depengine.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

if(TARGET depengine_ops)
  # OpenBLAS as the build found it (src/operators/CMakeLists.txt): through
  # its own pkg-config module, or as the libraries FindBLAS named.
  if(DEPENGINE_OPS_BLAS STREQUAL "pkgconfig")
    set(_depengine_pc_ops_requires "depengine = ${PROJECT_VERSION}, openblas")
    set(_depengine_pc_ops_libs "")
  else()
    set(_depengine_pc_ops_requires "depengine = ${PROJECT_VERSION}")
    string(JOIN " " _depengine_pc_ops_libs "" ${DEPENGINE_OPS_BLAS_LIBRARIES})
  endif()
  file(GENERATE OUTPUT ${_depengine_pc_dir}/depengine-ops.pc CONTENT "${_depengine_pc_head}
Name: depengine-ops
Description: depengine's operator layer: NDArray, operators, SimpleOp and the graph executor
Version: ${PROJECT_VERSION}
Requires: ${_depengine_pc_ops_requires}
Cflags: -I\${includedir}
Libs: \${libdir}/$<TARGET_LINKER_FILE_NAME:depengine_ops>${_depengine_pc_ops_libs}
")
  install(FILES ${_depengine_pc_dir}/depengine-ops.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
endif()
