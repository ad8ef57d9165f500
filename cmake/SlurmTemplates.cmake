# The sbatch templates (slurm/*.slurm.in: each template's own header and #SBATCH
# lines) share one settings comment (slurm/common-settings.txt) and one job body
# (slurm/common-body.sh); configure_file writes each, self-contained, to
# <build>/slurm/<name>.slurm, which is what `cmake --install` installs. The configs
# they default to are copied to <build>/configs, so that a template of the build tree
# finds ../configs and ../bin as an installed one finds them under share/cnnscale and bin.
file(READ ${PROJECT_SOURCE_DIR}/slurm/common-settings.txt CNNSCALE_TEMPLATE_SETTINGS)
file(READ ${PROJECT_SOURCE_DIR}/slurm/common-body.sh CNNSCALE_TEMPLATE_BODY)
string(STRIP "${CNNSCALE_TEMPLATE_SETTINGS}" CNNSCALE_TEMPLATE_SETTINGS)
string(STRIP "${CNNSCALE_TEMPLATE_BODY}" CNNSCALE_TEMPLATE_BODY)
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS
  ${PROJECT_SOURCE_DIR}/slurm/common-settings.txt ${PROJECT_SOURCE_DIR}/slurm/common-body.sh)

set(CNNSCALE_TEMPLATES "")
file(GLOB _template_ins CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/slurm/*.slurm.in)
foreach(_in ${_template_ins})
  get_filename_component(_name ${_in} NAME)
  string(REGEX REPLACE "\\.in$" "" _name ${_name})
  configure_file(${_in} ${CMAKE_BINARY_DIR}/slurm/${_name} @ONLY)
  list(APPEND CNNSCALE_TEMPLATES ${CMAKE_BINARY_DIR}/slurm/${_name})
endforeach()

file(GLOB CNNSCALE_CONFIGS CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/configs/*.ini)
foreach(_ini ${CNNSCALE_CONFIGS})
  get_filename_component(_name ${_ini} NAME)
  configure_file(${_ini} ${CMAKE_BINARY_DIR}/configs/${_name} COPYONLY)
endforeach()
