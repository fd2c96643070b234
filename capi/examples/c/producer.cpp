// A C++ producer: a std::vector handed out as a DLPack tensor with dlport_wrap (the vector is
// moved into the release context, so the callback frees it), imported without a copy, viewed
// as a DLTensor, with exactly one release callback on success and on every error path.
// Build: c++ -std=c++17 producer.cpp $(pkg-config --cflags --libs dlport)   (or CMake).
#include <dlport.h>

#include <cstdint>
#include <cstdio>
#include <memory>
#include <vector>

namespace {

int passed = 0, failed = 0;

void expect(bool ok, const char* what) {
  if (ok) {
    ++passed;
  } else {
    ++failed;
    const char* e = dlport_last_error();
    std::printf("FAILED: %s (last error: %s)\n", what, e ? e : "none");
  }
}

// Owns the producer's memory until dlport calls back; counts the callbacks.
struct Owner {
  std::vector<double> values;
  int* calls;
};

extern "C" void release_owner(void* ctx) {
  Owner* owner = static_cast<Owner*>(ctx);
  *owner->calls += 1;
  delete owner;
}

struct TensorFree {
  void operator()(DlportTensor* t) const { dlport_tensor_free(t); }
};
using Tensor = std::unique_ptr<DlportTensor, TensorFree>;

// Wraps a new Owner's vector of 4 doubles; the Owner is dlport's from here on, on every path.
int wrap(int* calls, int32_t ndim, const int64_t* shape, uint64_t flags, int to_versioned,
         void** out, const double** data = nullptr) {
  Owner* owner = new Owner{{1.5, 2.5, 3.5, 4.5}, calls};
  if (data != nullptr) *data = owner->values.data();
  return dlport_wrap(owner->values.data(), kDLCPU, 0, kDLFloat, 64, 1, ndim, shape, nullptr, 0,
                     flags, to_versioned, release_owner, owner, out);
}

}  // namespace

int main() {
  const int64_t shape[1] = {4};
  std::printf("dlport %s\n", dlport_version());

  int calls = 0;
  void* managed = nullptr;
  const double* data = nullptr;
  expect(wrap(&calls, 1, shape, 0, 1, &managed, &data) == DLPORT_OK, "wrap succeeds");
  DlportImportOptions options{};
  options.copy = DLPORT_COPY_NEVER;
  options.layout = DLPORT_LAYOUT_ROW_MAJOR;
  DlportTensor* raw = nullptr;
  expect(dlport_import(managed, 1, &options, &raw) == DLPORT_OK, "import without a copy");
  {
    Tensor tensor(raw);
    DLTensor view{};
    expect(dlport_tensor_view(tensor.get(), &view) == DLPORT_OK, "tensor view");
    std::printf("zero copy: vector data at %p, imported data at %p\n",
                static_cast<const void*>(data), view.data);
    expect(view.data == static_cast<const void*>(data), "the import is the producer's vector");
    expect(view.ndim == 1 && view.shape[0] == 4 && view.dtype.bits == 64, "the view's shape");
    expect(static_cast<const double*>(view.data)[3] == 4.5, "the view reads the values");
    expect(calls == 0, "no callback while the tensor lives");
  }
  std::printf("callbacks after success: %d\n", calls);
  expect(calls == 1, "one callback when the handle is freed");

  struct Case {
    const char* what;
    int32_t ndim;
    const int64_t* shape;
    uint64_t flags;
    int to_versioned;
    bool null_out;
    int status;
  };
  const Case cases[] = {
      {"NULL out", 1, shape, 0, 1, true, DLPORT_INVALID_ARGUMENT},
      {"ndim 1000", 1000, shape, 0, 1, false, DLPORT_ERR_NDIM_OUT_OF_RANGE},
      {"padded sub-byte to legacy", 1, shape, DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED, 0, false,
       DLPORT_ERR_FLAG_NOT_REPRESENTABLE},
      {"unknown flag bit", 1, shape, uint64_t{1} << 40, 1, false, DLPORT_ERR_UNKNOWN_FLAGS},
  };
  for (const Case& c : cases) {
    calls = 0;
    managed = nullptr;
    int status = wrap(&calls, c.ndim, c.shape, c.flags, c.to_versioned, c.null_out ? nullptr : &managed);
    std::printf("error path %-26s status %3d, callbacks %d\n", c.what, status, calls);
    expect(status == c.status, c.what);
    expect(calls == 1, "exactly one callback on the error path");
    expect(managed == nullptr, "nothing written on error");
  }

  std::printf("producer (C++): %d passed, %d failed\n", passed, failed);
  return failed != 0;
}
