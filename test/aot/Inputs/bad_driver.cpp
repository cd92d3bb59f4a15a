// A driver that does not compile: synkc --main must report the compiler's error and exit 1.
#include "intro.h"

int main() { return no_such_function(intro::f()); }
