// runtime/device.cc: parsing and printing devices.
#include "runtime/device.h"

#include <cctype>

#include "runtime/error.h"

namespace kiln {

const char* DeviceTypeName(DeviceType t) {
  switch (t) {
    case DeviceType::CPU: return "cpu";
    case DeviceType::CUDA: return "cuda";
    case DeviceType::Meta: return "meta";
  }
  return "?";
}

Device Device::Parse(const std::string& spec) {
  std::string type = spec, index;
  auto colon = spec.find(':');
  if (colon != std::string::npos) {
    type = spec.substr(0, colon);
    index = spec.substr(colon + 1);
    bool digits = !index.empty() && index.size() < 5;
    for (char c : index) digits = digits && std::isdigit(static_cast<unsigned char>(c));
    KILN_CHECK(digits, "Invalid device string: '", spec, "'");
  }
  Device d;
  if (type == "cpu") d.type = DeviceType::CPU;
  else if (type == "cuda") d.type = DeviceType::CUDA;
  else if (type == "meta") d.type = DeviceType::Meta;
  else
    KILN_CHECK(false, "Expected one of cpu, cuda, meta device type at start of device string: ", spec);
  if (!index.empty()) d.index = static_cast<int16_t>(std::stoi(index));
  return d;
}

std::string Device::str() const {
  std::string s = DeviceTypeName(type);
  if (index >= 0) s += ":" + std::to_string(index);
  return s;
}

}  // namespace kiln
