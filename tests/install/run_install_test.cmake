# Script mode: install, configure the consumer, build it, run it.
file(REMOVE_RECURSE ${WORK_DIR})
function(run)
  execute_process(COMMAND ${ARGV} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "command failed (${rc}): ${ARGV}\n${out}\n${err}")
  endif()
  message("${out}")
endfunction()
run(${CMAKE_COMMAND} --install ${ACC_BUILD_DIR} --prefix ${WORK_DIR}/prefix)
# A sanitized libacc needs its runtime loaded first, so the consumer is built with it too.
set(sanitize_flags "")
if(ACC_SANITIZE)
  set(sanitize_flags -DCMAKE_CXX_FLAGS=-fsanitize=address,undefined)
endif()
run(${CMAKE_COMMAND} -S ${CONSUMER_SOURCE_DIR} -B ${WORK_DIR}/build -G Ninja
    -DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix -DCMAKE_BUILD_TYPE=Release ${sanitize_flags})
run(${CMAKE_COMMAND} --build ${WORK_DIR}/build)
run(${WORK_DIR}/build/consumer)
# The installed command works from this prefix with no LD_LIBRARY_PATH: it finds libacc and the
# plugins beside it, and launches the consumer on 2 ranks.
set(installed ${CMAKE_COMMAND} -E env --unset=LD_LIBRARY_PATH ${WORK_DIR}/prefix/bin/accelerate)
run(${installed} env)
run(${installed} config validate ${CONSUMER_SOURCE_DIR}/../../../configs/fsdp_full_shard.yaml)
run(${installed} launch --num_processes 2 ${WORK_DIR}/build/consumer)
# A strategy plugin built the same way: only the installed headers and libacc.
run(${CMAKE_COMMAND} -S ${PLUGIN_SOURCE_DIR} -B ${WORK_DIR}/diloco -G Ninja
    -DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix -DCMAKE_BUILD_TYPE=Release ${sanitize_flags})
run(${CMAKE_COMMAND} --build ${WORK_DIR}/diloco)
