#include "core/sim/model.h"

namespace unipool::sim {

const char* ComponentName(Component c) {
  switch (c) {
    case Component::kGpu: return "gpu";
    case Component::kNode: return "node";
    case Component::kNic: return "nic";
    case Component::kLeafSwitch: return "leaf-switch";
    case Component::kSpineSwitch: return "spine-switch";
    case Component::kPowerDomain: return "power-domain";
  }
  return "unknown";
}

}  // namespace unipool::sim
