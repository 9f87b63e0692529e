if(TARGET diffnet_synth)
  diffnet_test(synth SOURCES test_synth_units.cpp test_synth_ops.cpp test_synth_cli.cpp LIBS diffnet_synth)
endif()
