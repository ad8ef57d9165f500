# Installation layout: bin/cnnscale, share/cnnscale/{slurm,configs,docs}, modulefiles/.
include(GNUInstallDirs)
install(TARGETS cnnscale RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
