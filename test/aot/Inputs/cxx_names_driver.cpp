// Calls every entry point of test/aot/Inputs/cxx_names.synk, built as module kModule.
#include <cstdio>
#include <vector>

#include "kModule.h"

int main() {
  synk::fork(1);
  synk::Data x = synk::data<float>({1, 2, 3}, {3});
  for (synk::Function f : {kModule::class_(), kModule::kModule(), kModule::kText(), kModule::save_checkpoint_()})
    std::printf("%s %g\n", f.name().c_str(), synk::to_vector<float>(f({x})[0])[2]);
  synk::close();
}
