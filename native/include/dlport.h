/*
 * dlport.h — the C ABI of dlport-native (libdlport_native.so).
 *
 * Every function returns a status (0 = DLPORT_OK) unless it returns void or a string. On
 * failure the status is the dlport error code (> 0) or one of the negative codes below, and
 * dlport_last_error() returns the message for this thread. No function unwinds or aborts on bad
 * input. Managed tensors are passed as `void*` plus `versioned` (0 = legacy DLManagedTensor,
 * 1 = DLManagedTensorVersioned). Functions marked CONSUMING take ownership of their input on
 * every path: on success and on error the caller must not release it again.
 */
#ifndef DLPORT_H_
#define DLPORT_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The DLPack 1.3 structs, unless dlpack.h was included first. */
#ifndef DLPACK_DLPACK_H_
typedef struct { uint32_t major; uint32_t minor; } DLPackVersion;
typedef struct { int32_t device_type; int32_t device_id; } DLDevice;
typedef struct { uint8_t code; uint8_t bits; uint16_t lanes; } DLDataType;
typedef struct {
  void* data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;
  int64_t* strides;
  uint64_t byte_offset;
} DLTensor;
typedef struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(struct DLManagedTensor* self);
} DLManagedTensor;
typedef struct DLManagedTensorVersioned {
  DLPackVersion version;
  void* manager_ctx;
  void (*deleter)(struct DLManagedTensorVersioned* self);
  uint64_t flags;
  DLTensor dl_tensor;
} DLManagedTensorVersioned;
#define DLPACK_FLAG_BITMASK_READ_ONLY (1UL << 0UL)
#define DLPACK_FLAG_BITMASK_IS_COPIED (1UL << 1UL)
#define DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED (1UL << 2UL)
#endif

/* Status codes (besides the positive dlport error codes). */
#define DLPORT_OK 0
#define DLPORT_PANIC (-1)            /* an internal bug was caught at the boundary */
#define DLPORT_INVALID_ARGUMENT (-2) /* a NULL out pointer or an enum out of range */

/* Copy policies (the array-API `copy` argument). */
#define DLPORT_COPY_NEVER 0
#define DLPORT_COPY_IF_NEEDED 1
#define DLPORT_COPY_ALWAYS 2

/* Layout needs for import. */
#define DLPORT_LAYOUT_ANY 0
#define DLPORT_LAYOUT_DENSE 1
#define DLPORT_LAYOUT_ROW_MAJOR 2

/* A tensor held by a dlport backend. */
typedef struct DlportTensor DlportTensor;

/* Import options; device types of 0 mean "not given". */
typedef struct {
  int32_t target_device_type;     /* 0: the data's own device */
  int32_t target_device_id;
  int32_t advertised_device_type; /* what __dlpack_device__ said; 0: nothing */
  int32_t advertised_device_id;
  int32_t copy;                   /* DLPORT_COPY_* */
  int32_t layout;                 /* DLPORT_LAYOUT_* */
  uint32_t alignment;             /* bytes, a power of two up to 2^30; 0 or 1: none. Copies
                                     made for the import are aligned to it too. */
  uint64_t max_alloc_bytes;       /* the most a copy for this call may allocate; 0: the
                                     process default (dlport_set_alloc_limit) */
} DlportImportOptions;

/* Error codes this header names (the full list: dlport_core::Error::code). */
#define DLPORT_ERR_ADDRESS_OVERFLOW 11     /* data + byte_offset leaves user-space memory */
#define DLPORT_ERR_READ_ONLY 19
#define DLPORT_ERR_COPY_REQUIRED 25
#define DLPORT_ERR_NOT_EXCLUSIVE 35        /* &mut access to shared memory */
#define DLPORT_ERR_FLAG_NOT_REPRESENTABLE 36 /* READ_ONLY / IS_SUBBYTE_TYPE_PADDED to legacy */
#define DLPORT_ERR_ALLOCATION_LIMIT 37     /* above the allocation limit; nothing allocated */
#define DLPORT_ERR_INVALID_OPTION 38       /* an option out of range, named in the message */

/* The most bytes any copy or allocation made by this ABI may take. 0 restores the default:
 * the machine's memory as the native registry measures it (the smallest of physical memory,
 * the cgroup's memory.max and RLIMIT_AS / RLIMIT_DATA). Above the limit a call fails with
 * DLPORT_ERR_ALLOCATION_LIMIT, naming the size and the limit, before anything is allocated. */
void dlport_set_alloc_limit(uint64_t bytes);
/* The limit in force for calls that give none of their own. */
uint64_t dlport_alloc_limit(void);

/* The library version ("0.1.0"), static. */
const char* dlport_version(void);

/* The last error message on this thread, or NULL after a success. Valid until the next dlport
 * call on this thread (at most 2047 bytes; a longer message is cut and ends in "..."). Like
 * every entry, it also works while the thread or the process shuts down: from an atexit
 * handler, a C++ static destructor or a pthread-key destructor. */
const char* dlport_last_error(void);

/* Frees a string returned by dlport (NULL is ignored). */
void dlport_string_free(char* s);

/* Validates a managed tensor WITHOUT taking ownership and describes it as JSON. */
int dlport_describe(const void* managed, int versioned, char** json_out);

/* Calls a managed tensor's deleter (NULL is ignored).
 *
 * dlport recognises the tensors it exported by identity, not by address: a released export's
 * memory stays reserved while it is among the last 4096 released (a quarantine), so no other
 * tensor can be allocated at its address meanwhile.
 * Detected, refused with DLPORT_INVALID_ARGUMENT ("already released", naming the address) and
 *   running nothing: a dlport export released again while among the last 4096 released, by
 *   dlport_release, by calling its deleter again, or by passing it to any dlport function;
 *   and a nested release (a deleter that dlport runs releases the export being released).
 *   A refused call of an export's deleter returns nothing; dlport_last_error() says why.
 * Released normally: every tensor that is not a dlport export, including one that lives at an
 *   address where a released dlport export used to be.
 * Not detected (undefined behaviour, as in DLPack): a foreign tensor released twice (its memory
 *   belongs to its producer and may be gone), and a dlport export released again after 4096
 *   later releases (its memory has been freed and may hold another tensor). */
int dlport_release(void* managed, int versioned);

/* CONSUMING. Imports a managed tensor onto a backend (options may be NULL: copy if needed). */
int dlport_import(void* managed, int versioned, const DlportImportOptions* options, DlportTensor** out);

/* Exports a backend tensor. max_version_major < 1: legacy; >= 1: versioned (*versioned_out).
 * dl_device_type 0: the tensor's own device. copy: DLPORT_COPY_*. A legacy consumer never
 * receives a READ_ONLY or padded sub-byte tensor by reference: it gets a compact copy, or with
 * DLPORT_COPY_NEVER the error DLPORT_ERR_COPY_REQUIRED naming the flag. */
int dlport_export(const DlportTensor* tensor, int32_t max_version_major, int32_t max_version_minor,
                  int32_t dl_device_type, int32_t dl_device_id, int32_t copy, void** managed_out,
                  int* versioned_out);

/* CONSUMING. Legacy <-> versioned without a copy. A versioned tensor with READ_ONLY or
 * IS_SUBBYTE_TYPE_PADDED is refused for the legacy form (DLPORT_ERR_FLAG_NOT_REPRESENTABLE):
 * the legacy struct has no flags, and dropping them would let a consumer write read-only
 * memory or misread padded elements; use dlport_compact for a legacy copy. */
int dlport_convert(void* managed, int versioned, int to_versioned, void** out);

/* CONSUMING. Host-accessible memory (pinned, managed, cpu) shown as kDLCPU without a copy,
 * keeping the original alive. advertised_*: what __dlpack_device__ said (0: nothing). */
int dlport_host_view(void* managed, int versioned, int32_t advertised_device_type,
                     int32_t advertised_device_id, int to_versioned, void** out);

/* CONSUMING. A compact, 64-byte-aligned copy of a strided host tensor (copy: DLPORT_COPY_*). */
int dlport_compact(void* managed, int versioned, int to_versioned, int32_t copy, void** out);

/* Allocates a zeroed compact tensor; backend NULL: the one that serves the device. */
int dlport_alloc(const char* backend, int32_t device_type, int32_t device_id, uint8_t code,
                 uint8_t bits, uint16_t lanes, const int64_t* shape, int32_t ndim,
                 DlportTensor** out);

/* JSON description of a backend tensor (adds "backend", "users" and "data"). */
int dlport_tensor_describe(const DlportTensor* tensor, char** json_out);

/* Data pointer (host address or device handle) and byte offset of a backend tensor. */
int dlport_tensor_data(const DlportTensor* tensor, void** data_out, uint64_t* byte_offset_out);

/* Frees a backend tensor handle (NULL is ignored); exported DLPack tensors stay valid. */
void dlport_tensor_free(DlportTensor* tensor);

/* DLPack tensors handed out by this ABI, and how many consumers released. NULLs allowed. */
void dlport_export_counts(uint64_t* exported, uint64_t* released);

/* A PyCapsule_Destructor for DLPack capsules: releases the tensor only while the capsule is
 * still named "dltensor" / "dltensor_versioned"; keeps any pending Python exception. */
void dlport_capsule_destructor(void* capsule);

#ifdef __cplusplus
}
#endif

#endif /* DLPORT_H_ */
