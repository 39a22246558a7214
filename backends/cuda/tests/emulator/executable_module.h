/* Executable modules, shared by the emulated devices' drivers (../stub/libcuda_stub.c and
 * backends/rocm/tests/stub_hip.c): a module image that is a shared object for this machine,
 * as the emulator's NVRTC or hiprtc makes it, is opened with dlopen. The drivers take an
 * image as a bare pointer, as cuModuleLoadData and hipModuleLoadData do, so its size comes from
 * its own ELF header.
 *
 * XHEMU_DEVICE names the device in the module's temporary file and in messages ("cuda" unless
 * the including driver says otherwise). Needs dlfcn.h, stdint.h, stdio.h, stdlib.h, string.h
 * and unistd.h, with mkstemp declared (_GNU_SOURCE, or _POSIX_C_SOURCE 200809L). */
#ifndef XHEMU_EXECUTABLE_MODULE_H
#define XHEMU_EXECUTABLE_MODULE_H

#ifndef XHEMU_DEVICE
#define XHEMU_DEVICE "cuda"
#endif

/* The size of an x86-64 shared object (ELF64, ET_DYN), where `image` is one: its section
   header table ends the file. */
static size_t shared_object_size(const unsigned char *image) {
    uint16_t type, machine, entry_size, entries;
    uint64_t table;
    if (memcmp(image, "\x7f" "ELF", 4) != 0 || image[4] != 2) return 0;
    memcpy(&type, image + 16, 2);
    memcpy(&machine, image + 18, 2);
    if (type != 3 || machine != 62) return 0;
    memcpy(&table, image + 0x28, 8);
    memcpy(&entry_size, image + 0x3A, 2);
    memcpy(&entries, image + 0x3C, 2);
    return (size_t)(table + (uint64_t)entry_size * entries);
}

/* Opens the shared object `image` through a file of its own, removed once open. */
static void *open_executable(const unsigned char *image, size_t size) {
    char path[] = "/tmp/xhal-" XHEMU_DEVICE "-emulator-module-XXXXXX";
    int file = mkstemp(path);
    if (file < 0) return NULL;
    int written = write(file, image, size) == (ssize_t)size;
    close(file);
    void *handle = written ? dlopen(path, RTLD_NOW | RTLD_LOCAL) : NULL;
    if (!handle) fprintf(stderr, XHEMU_DEVICE " emulator: cannot open a module: %s\n", dlerror());
    unlink(path);
    return handle;
}

#endif
