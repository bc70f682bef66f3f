// runtime/device.h: where a tensor lives: a device type and an index ("cpu", "cuda:0", "meta").
#pragma once

#include <cstdint>
#include <string>

namespace kiln {

enum class DeviceType : int8_t { CPU = 0, CUDA = 1, Meta = 2 };

struct Device {
  DeviceType type = DeviceType::CPU;
  int16_t index = -1;  // -1: "the current device" (always 0 for CPU and meta)

  Device() = default;
  Device(DeviceType t, int16_t i = -1) : type(t), index(i) {}
  // Parses "cpu", "cuda", "cuda:1", "meta"; throws RuntimeError naming the string otherwise.
  static Device Parse(const std::string& spec);

  bool is_cpu() const { return type == DeviceType::CPU; }
  bool is_cuda() const { return type == DeviceType::CUDA; }
  bool is_meta() const { return type == DeviceType::Meta; }
  bool operator==(const Device& o) const { return type == o.type && index == o.index; }
  bool operator!=(const Device& o) const { return !(*this == o); }
  std::string str() const;  // "cpu", "cuda:0"
};

const char* DeviceTypeName(DeviceType t);

}  // namespace kiln
