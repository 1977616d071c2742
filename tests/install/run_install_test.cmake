# Consumer tests, run with cmake -P; see tests/CMakeLists.txt for the
# variables. MODE selects what a user's project does with depengine:
#   install (default): installs depengine from BUILD_DIR into a scratch
#     prefix under WORK_DIR, then configures, builds and runs the consumer
#     project in CONSUMER_SOURCE against that prefix with
#     find_package(depengine).
#   subproject: configures the parent project in CONSUMER_SOURCE, which adds
#     depengine's source tree (SOURCE_DIR) with add_subdirectory and checks,
#     at configure time, what that does to the parent.
if(NOT MODE)
  set(MODE install)
endif()
set(required WORK_DIR CONSUMER_SOURCE GENERATOR CXX_COMPILER)
if(MODE STREQUAL "install")
  list(APPEND required BUILD_DIR)
elseif(MODE STREQUAL "subproject")
  list(APPEND required SOURCE_DIR)
else()
  message(FATAL_ERROR "run_install_test.cmake: unknown MODE '${MODE}' (install or subproject)")
endif()
foreach(var ${required})
  if(NOT DEFINED ${var} OR "${${var}}" STREQUAL "")
    message(FATAL_ERROR "run_install_test.cmake: ${var} is not set")
  endif()
endforeach()

set(prefix ${WORK_DIR}/prefix)
set(consumer_build ${WORK_DIR}/consumer-build)
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})

function(run_step what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (${rc}):\n${out}\n${err}")
  endif()
  message(STATUS "${what}: ok")
endfunction()

if(MODE STREQUAL "subproject")
  # No CMAKE_BUILD_TYPE: the parent leaves it empty, and depengine must not
  # choose one for it.
  run_step("configure parent project" ${CMAKE_COMMAND} -S ${CONSUMER_SOURCE} -B ${consumer_build}
    -G ${GENERATOR}
    -DCMAKE_CXX_COMPILER=${CXX_COMPILER}
    -DDEPENGINE_SOURCE_DIR=${SOURCE_DIR})
  # A parent that also builds depengine's tests and benchmarks.
  run_step("configure parent project with depengine's tests" ${CMAKE_COMMAND}
    -S ${CONSUMER_SOURCE} -B ${consumer_build}-with-tests
    -G ${GENERATOR}
    -DCMAKE_CXX_COMPILER=${CXX_COMPILER}
    -DDEPENGINE_SOURCE_DIR=${SOURCE_DIR}
    -DDEPENGINE_BUILD_TESTS=ON -DDEPENGINE_BUILD_BENCH=ON -DWITH_DEPENGINE_TESTS=ON)
  # A parent on a machine without OpenBLAS (pkg-config and FindBLAS both
  # see none) that uses only the engine.
  file(MAKE_DIRECTORY ${WORK_DIR}/no-pkgconfig)
  run_step("configure parent project without OpenBLAS" ${CMAKE_COMMAND} -E env
    --unset=PKG_CONFIG_PATH PKG_CONFIG_LIBDIR=${WORK_DIR}/no-pkgconfig
    ${CMAKE_COMMAND} -S ${CONSUMER_SOURCE} -B ${consumer_build}-no-blas
    -G ${GENERATOR}
    -DCMAKE_CXX_COMPILER=${CXX_COMPILER}
    -DDEPENGINE_SOURCE_DIR=${SOURCE_DIR}
    -DCMAKE_DISABLE_FIND_PACKAGE_BLAS=ON -DNO_BLAS=ON)
  return()
endif()

# Installed in one place and used from another: the installed package must
# be relocatable (no absolute paths into the install prefix).
run_step("install" ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${WORK_DIR}/install-prefix)
file(RENAME ${WORK_DIR}/install-prefix ${prefix})

# find_package as users call it (tests/install/package): components and
# versions, then on a machine without OpenBLAS (pkg-config and FindBLAS both
# see none), where the engine must still be found and depengine::ops not.
set(expect_ops 0)
if(OPS_EXPECTED)
  set(expect_ops 1)
endif()
set(package_checks ${CONSUMER_SOURCE}/package)
run_step("find_package checks" ${CMAKE_COMMAND} -S ${package_checks} -B ${WORK_DIR}/package
  -G ${GENERATOR} -DCMAKE_CXX_COMPILER=${CXX_COMPILER} -DCMAKE_PREFIX_PATH=${prefix}
  -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF -DEXPECT_OPS=${expect_ops})
file(MAKE_DIRECTORY ${WORK_DIR}/no-pkgconfig)
run_step("find_package checks without OpenBLAS" ${CMAKE_COMMAND} -E env --unset=PKG_CONFIG_PATH
  PKG_CONFIG_LIBDIR=${WORK_DIR}/no-pkgconfig
  ${CMAKE_COMMAND} -S ${package_checks} -B ${WORK_DIR}/package-no-blas --no-warn-unused-cli
  -G ${GENERATOR} -DCMAKE_CXX_COMPILER=${CXX_COMPILER} -DCMAKE_PREFIX_PATH=${prefix}
  -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF -DCMAKE_DISABLE_FIND_PACKAGE_BLAS=ON -DEXPECT_OPS=0)

# A sanitizer build of depengine: the consumer is built with no sanitizer
# flag, as by a user who does not know how depengine was built, and links
# because depengine::depengine brings its sanitizer runtime (an INTERFACE
# link option). CONSUMER_SANITIZE is for the one program that only links a
# shared library of the consumer's (tests/install/CMakeLists.txt).
set(build_type Release)
if(BUILD_TYPE)
  set(build_type ${BUILD_TYPE})
endif()

run_step("configure consumer" ${CMAKE_COMMAND} -S ${CONSUMER_SOURCE} -B ${consumer_build}
  -G ${GENERATOR}
  -DCMAKE_CXX_COMPILER=${CXX_COMPILER}
  -DCMAKE_BUILD_TYPE=${build_type}
  -DCMAKE_PREFIX_PATH=${prefix}
  -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF
  "-DCONSUMER_SANITIZE=${SANITIZE}")
run_step("build consumer" ${CMAKE_COMMAND} --build ${consumer_build} -j 1)
run_step("run consumer" ${consumer_build}/consumer)
run_step("run shared library consumer" ${consumer_build}/shared_consumer)
if(EXISTS ${consumer_build}/ops_consumer)
  run_step("run ops consumer" ${consumer_build}/ops_consumer)
elseif(OPS_EXPECTED)
  message(FATAL_ERROR "depengine_ops was built but the installed package has no depengine::ops")
endif()

# pkg-config, as a program built without CMake uses depengine: the version
# the files name, then the consumers compiled and linked with nothing but
# the compiler, -std=c++20 and what `pkg-config --cflags --libs` prints.
if(NOT PKG_CONFIG)
  message(FATAL_ERROR "pkg-config was not found, so the installed depengine.pc cannot be checked "
                      "(Debian: apt-get install pkg-config; tools/setup.sh installs it)")
endif()
foreach(var INSTALL_LIBDIR EXPECTED_VERSION)
  if(NOT DEFINED ${var} OR "${${var}}" STREQUAL "")
    message(FATAL_ERROR "run_install_test.cmake: ${var} is not set")
  endif()
endforeach()
set(pc_env ${CMAKE_COMMAND} -E env --unset=PKG_CONFIG_LIBDIR
    PKG_CONFIG_PATH=${prefix}/${INSTALL_LIBDIR}/pkgconfig)
function(pkg_config out_var)
  execute_process(COMMAND ${pc_env} ${PKG_CONFIG} ${ARGN}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err
                  OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "pkg-config ${ARGN} failed (${rc}):\n${out}\n${err}")
  endif()
  set(${out_var} "${out}" PARENT_SCOPE)
endfunction()
function(pkg_config_consumer module source program)
  pkg_config(flags --cflags --libs ${module})
  separate_arguments(flags UNIX_COMMAND "${flags}")
  run_step("build ${program} with pkg-config ${module}" ${CXX_COMPILER} -std=c++20 -O1
    ${source} -o ${WORK_DIR}/${program} ${flags})
  run_step("run ${program}" ${WORK_DIR}/${program})
endfunction()

set(pc_modules depengine)
if(OPS_EXPECTED)
  list(APPEND pc_modules depengine-ops)
endif()
foreach(module ${pc_modules})
  pkg_config(version --modversion ${module})
  if(NOT version STREQUAL EXPECTED_VERSION)
    message(FATAL_ERROR "pkg-config says ${module} is version '${version}', the build is "
                        "${EXPECTED_VERSION}")
  endif()
endforeach()
pkg_config_consumer(depengine ${CONSUMER_SOURCE}/main.cc pkgconfig_consumer)
if(OPS_EXPECTED)
  pkg_config_consumer(depengine-ops ${CONSUMER_SOURCE}/ops_main.cc pkgconfig_ops_consumer)
endif()
