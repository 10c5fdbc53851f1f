# sextant_test(NAME SOURCES... LIBS... [LABELS...]): a single-process GoogleTest.
function(sextant_test name)
  cmake_parse_arguments(T "" "TIMEOUT" "SOURCES;LIBS;LABELS" ${ARGN})
  add_executable(${name} ${T_SOURCES})
  target_link_libraries(${name} PRIVATE ${T_LIBS} GTest::gtest GTest::gtest_main)
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 300)
  endif()
  add_test(NAME ${name} COMMAND ${name})
  set_tests_properties(${name} PROPERTIES TIMEOUT ${T_TIMEOUT} LABELS "unit;${T_LABELS}"
                       ENVIRONMENT "${SEXTANT_TEST_ENV}")
endfunction()

# sextant_mpi_test(NAME SOURCES... LIBS... NP n...): a GoogleTest run under
# mpiexec at each rank count, with a timeout so a hung collective fails
# instead of hanging CI. Uses sextant_gtest_mpi_main (MPI init, rank-0 output).
function(sextant_mpi_test name)
  cmake_parse_arguments(T "" "TIMEOUT" "SOURCES;LIBS;NP;LABELS;ARGS" ${ARGN})
  add_executable(${name} ${T_SOURCES})
  target_link_libraries(${name} PRIVATE ${T_LIBS} sextant_gtest_mpi_main)
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 600)
  endif()
  foreach(np ${T_NP})
    sextant_add_mpi_command(${name}_np${np} ${np} ${T_TIMEOUT} "mpi;${T_LABELS}"
                            $<TARGET_FILE:${name}> ${T_ARGS})
  endforeach()
endfunction()

# sextant_add_mpi_command(TEST_NAME NP TIMEOUT LABELS COMMAND...): any command under mpiexec.
function(sextant_add_mpi_command test_name np timeout labels)
  add_test(NAME ${test_name}
           COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${np} --oversubscribe
                   ${MPIEXEC_PREFLAGS} ${ARGN} ${MPIEXEC_POSTFLAGS})
  set_tests_properties(${test_name} PROPERTIES
    TIMEOUT ${timeout}
    LABELS "${labels}"
    PROCESSORS 1
    # OpenMPI refuses root without these; CI containers run as root.
    ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;OMPI_MCA_rmaps_base_oversubscribe=1;${SEXTANT_TEST_ENV}")
endfunction()

# sextant_suite(NAME LIBS ...): a suite folder's cases as an object library
# (every file's SEXTANT_REGISTER_CASE runs: object files are always linked).
# Sources are globbed, so a new case is one new file; *_test.cc and
# *_bench.cc are left to the folder's own targets.
function(sextant_suite name)
  cmake_parse_arguments(S "" "" "LIBS" ${ARGN})
  file(GLOB sources CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/*.cc)
  file(GLOB excluded CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/*_test.cc ${CMAKE_CURRENT_SOURCE_DIR}/*_bench.cc)
  if(excluded)
    list(REMOVE_ITEM sources ${excluded})
  endif()
  add_library(sextant_suite_${name} OBJECT ${sources})
  target_link_libraries(sextant_suite_${name} PUBLIC ${S_LIBS} sextant_harness)
endfunction()
