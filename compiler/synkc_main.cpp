// synkc, the synk compiler driver. Placeholder so that the build configures while the real
// driver (check, --emit=ast|ir, exit codes) is being written by the front-end work.
#include <cstdio>

int main() {
  std::fprintf(stderr, "synkc: not implemented yet\n");
  return 2;
}
