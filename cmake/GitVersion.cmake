# Run at every build (cmake -P): writes OUT with the git sha and dirty flag
# of the source being built, only when they changed, so that a binary says
# which source built it (not which source was there at configure time).
execute_process(COMMAND git -C "${SOURCE}" rev-parse --short=12 HEAD
                OUTPUT_VARIABLE sha OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
execute_process(COMMAND git -C "${SOURCE}" status --porcelain --untracked-files=no
                OUTPUT_VARIABLE changes ERROR_QUIET)
if(NOT sha)
  set(sha unknown)
endif()
if(changes)
  set(dirty true)
else()
  set(dirty false)
endif()
set(content "// Generated at build time by cmake/GitVersion.cmake.
#include \"harness/build_info.h\"

namespace sextant {
const char* build_git_sha() { return \"${sha}\"; }
bool build_git_dirty() { return ${dirty}; }
}  // namespace sextant
")
set(old "")
if(EXISTS "${OUT}")
  file(READ "${OUT}" old)
endif()
if(NOT old STREQUAL content)
  file(WRITE "${OUT}" "${content}")
endif()
