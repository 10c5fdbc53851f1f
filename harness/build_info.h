// Which source built this binary: the git sha and whether tracked files had
// uncommitted changes, taken at build time (cmake/GitVersion.cmake runs at
// every build), not at configure time.
#pragma once

namespace sextant {

const char* build_git_sha();  // 12 hex digits, or "unknown" outside a git checkout
bool build_git_dirty();

}  // namespace sextant
