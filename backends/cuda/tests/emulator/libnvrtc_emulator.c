/* The emulated CUDA device's NVRTC (libnvrtc.so.12): CUDA C becomes a shared object for the
 * host processor instead of a cubin, built with the system's C++ compiler and
 * cuda_emulator.h. The emulator's driver (libcuda_stub.c) loads that shared object as the
 * "cubin". See README.md beside this file.
 *
 * Built with -DXHEMU_HIPRTC, it is the emulated HIP device's hiprtc (libhiprtc.so) instead:
 * the same compiler behind hiprtc's names, for HIP C (the same text as the CUDA C xhal-kernel
 * writes), whose output backends/rocm/tests/stub_hip.c loads as the code object.
 *
 * - XHEMU_CXX: the compiler (default `c++`).
 * - XHEMU_HEADER: cuda_emulator.h (default: the path compiled in as XHEMU_DEFAULT_HEADER).
 * - XHEMU_CACHE_DIR: where built modules are kept, by a hash of the header, the source and the
 *   compiler (default: $TMPDIR or /tmp, then xhal-cuda-emulator-cache).
 * - XHEMU_KEEP=1: the build folder of each compilation is kept, for reading the C++ it built. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef XHEMU_DEFAULT_HEADER
#define XHEMU_DEFAULT_HEADER "cuda_emulator.h"
#endif

/* NVRTC's and hiprtc's entry points differ in their prefix and in the name of the compiled
   code; their results have the same numbers. */
#ifdef XHEMU_HIPRTC
#define RTC(name) hiprtc##name
#define RTC_PREFIX "HIPRTC_"
#define RTC_LIBRARY "hiprtc"
#define RTC_TARGET_OPTION "--offload-arch=gfx"
#define RTC_VERSION_MAJOR 6
#define RTC_VERSION_MINOR 2
#define RTC_CODE_SIZE hiprtcGetCodeSize
#define RTC_CODE hiprtcGetCode
#else
#define RTC(name) nvrtc##name
#define RTC_PREFIX "NVRTC_"
#define RTC_LIBRARY "NVRTC"
#define RTC_TARGET_OPTION "--gpu-architecture=sm_"
#define RTC_VERSION_MAJOR 12
#define RTC_VERSION_MINOR 8
#define RTC_CODE_SIZE nvrtcGetCUBINSize
#define RTC_CODE nvrtcGetCUBIN
#endif

typedef int nvrtcResult;
enum {
    NVRTC_SUCCESS = 0,
    NVRTC_ERROR_OUT_OF_MEMORY = 1,
    NVRTC_ERROR_PROGRAM_CREATION_FAILURE = 2,
    NVRTC_ERROR_INVALID_INPUT = 3,
    NVRTC_ERROR_INVALID_PROGRAM = 4,
    NVRTC_ERROR_INVALID_OPTION = 5,
    NVRTC_ERROR_COMPILATION = 6,
    NVRTC_ERROR_INTERNAL_ERROR = 11,
};

typedef struct {
    char *source;
    char *log;
    unsigned char *image;
    size_t image_size;
} Program;
typedef Program *nvrtcProgram;

const char *RTC(GetErrorString)(nvrtcResult result) {
    switch (result) {
    case NVRTC_SUCCESS: return RTC_PREFIX "SUCCESS";
    case NVRTC_ERROR_OUT_OF_MEMORY: return RTC_PREFIX "ERROR_OUT_OF_MEMORY";
    case NVRTC_ERROR_PROGRAM_CREATION_FAILURE: return RTC_PREFIX "ERROR_PROGRAM_CREATION_FAILURE";
    case NVRTC_ERROR_INVALID_INPUT: return RTC_PREFIX "ERROR_INVALID_INPUT";
    case NVRTC_ERROR_INVALID_PROGRAM: return RTC_PREFIX "ERROR_INVALID_PROGRAM";
    case NVRTC_ERROR_INVALID_OPTION: return RTC_PREFIX "ERROR_INVALID_OPTION";
    case NVRTC_ERROR_COMPILATION: return RTC_PREFIX "ERROR_COMPILATION";
    default: return RTC_PREFIX "ERROR_INTERNAL_ERROR";
    }
}

nvrtcResult RTC(Version)(int *major, int *minor) {
    if (!major || !minor) return NVRTC_ERROR_INVALID_INPUT;
    *major = RTC_VERSION_MAJOR;
    *minor = RTC_VERSION_MINOR;
    return NVRTC_SUCCESS;
}

#ifndef XHEMU_HIPRTC
static const int architectures[] = {75, 80, 86, 89, 90};

nvrtcResult nvrtcGetNumSupportedArchs(int *count) {
    if (!count) return NVRTC_ERROR_INVALID_INPUT;
    *count = (int)(sizeof architectures / sizeof architectures[0]);
    return NVRTC_SUCCESS;
}

nvrtcResult nvrtcGetSupportedArchs(int *list) {
    if (!list) return NVRTC_ERROR_INVALID_INPUT;
    memcpy(list, architectures, sizeof architectures);
    return NVRTC_SUCCESS;
}
#endif

nvrtcResult RTC(CreateProgram)(nvrtcProgram *program, const char *source, const char *name, int headers,
                               const char *const *header_sources, const char *const *header_names) {
    (void)name; (void)header_sources; (void)header_names;
    if (!program || !source || headers < 0) return NVRTC_ERROR_INVALID_INPUT;
    if (headers > 0) return NVRTC_ERROR_INVALID_INPUT; /* the emulator takes whole sources only */
    Program *created = calloc(1, sizeof(Program));
    if (!created || !(created->source = strdup(source))) {
        free(created);
        return NVRTC_ERROR_OUT_OF_MEMORY;
    }
    *program = created;
    return NVRTC_SUCCESS;
}

nvrtcResult RTC(DestroyProgram)(nvrtcProgram *program) {
    if (!program || !*program) return NVRTC_ERROR_INVALID_PROGRAM;
    free((*program)->source);
    free((*program)->log);
    free((*program)->image);
    free(*program);
    *program = NULL;
    return NVRTC_SUCCESS;
}

static char *read_file(const char *path, size_t *size) {
    FILE *file = fopen(path, "rb");
    if (!file) return NULL;
    fseek(file, 0, SEEK_END);
    long length = ftell(file);
    fseek(file, 0, SEEK_SET);
    char *bytes = malloc((size_t)length + 1);
    if (bytes && fread(bytes, 1, (size_t)length, file) != (size_t)length) {
        free(bytes);
        bytes = NULL;
    }
    fclose(file);
    if (bytes) {
        bytes[length] = 0;
        if (size) *size = (size_t)length;
    }
    return bytes;
}

/* Makes `path` and the folders above it that are missing, like `mkdir -p`. */
static void make_folders(const char *path) {
    char partial[4096];
    snprintf(partial, sizeof partial, "%s", path);
    for (char *at = partial + 1; *at; at++) {
        if (*at == '/') {
            *at = 0;
            mkdir(partial, 0700);
            *at = '/';
        }
    }
    mkdir(partial, 0700);
}

static uint64_t fnv1a(uint64_t hash, const char *bytes, size_t length) {
    for (size_t i = 0; i < length; i++) {
        hash ^= (unsigned char)bytes[i];
        hash *= 0x100000001b3ULL;
    }
    return hash;
}

/* Appends `XHEMU_KERNEL(name, barriers)` for every `extern "C" __global__ void` function. */
static char *with_entry_points(const char *source) {
    const int barriers = strstr(source, "__syncthreads") != NULL;
    size_t capacity = strlen(source) + 4096, length = strlen(source);
    char *out = malloc(capacity);
    if (!out) return NULL;
    memcpy(out, source, length + 1);
    const char *marker = "extern \"C\" __global__ void ";
    for (const char *at = strstr(source, marker); at; at = strstr(at + 1, marker)) {
        const char *name = at + strlen(marker);
        if (strncmp(name, "__launch_bounds__(", 18) == 0) {
            name = strchr(name, ')');
            if (!name) break;
            name++;
            while (*name == ' ') name++;
        }
        size_t name_length = strcspn(name, " (");
        if (length + name_length + 64 >= capacity) {
            capacity = capacity * 2 + name_length + 64;
            char *grown = realloc(out, capacity);
            if (!grown) {
                free(out);
                return NULL;
            }
            out = grown;
        }
        length += (size_t)snprintf(out + length, capacity - length, "\nXHEMU_KERNEL(%.*s, %d)", (int)name_length, name,
                                   barriers);
    }
    strcat(out, "\n");
    return out;
}

static void set_log(Program *program, const char *text) {
    free(program->log);
    program->log = strdup(text);
}

nvrtcResult RTC(CompileProgram)(nvrtcProgram program, int count, const char *const *options) {
    if (!program) return NVRTC_ERROR_INVALID_PROGRAM;
    for (int i = 0; i < count; i++) {
        if (strncmp(options[i], RTC_TARGET_OPTION, strlen(RTC_TARGET_OPTION)) != 0 &&
            strcmp(options[i], "--std=c++17") != 0 && strcmp(options[i], "-std=c++17") != 0) {
            char message[512];
            snprintf(message, sizeof message, "emulator " RTC_LIBRARY ": unsupported option %s", options[i]);
            set_log(program, message);
            return NVRTC_ERROR_INVALID_OPTION;
        }
    }
    const char *header = getenv("XHEMU_HEADER") ? getenv("XHEMU_HEADER") : XHEMU_DEFAULT_HEADER;
    const char *compiler = getenv("XHEMU_CXX") ? getenv("XHEMU_CXX") : "c++";
    size_t header_size = 0;
    char *header_text = read_file(header, &header_size);
    if (!header_text) {
        char message[4200];
        snprintf(message, sizeof message,
                 "emulator " RTC_LIBRARY ": cannot read the emulator header %s (set XHEMU_HEADER)", header);
        set_log(program, message);
        return NVRTC_ERROR_INTERNAL_ERROR;
    }
    char *source = with_entry_points(program->source);
    if (!source) {
        free(header_text);
        return NVRTC_ERROR_OUT_OF_MEMORY;
    }
    uint64_t key = fnv1a(0xcbf29ce484222325ULL, header_text, header_size);
    key = fnv1a(key, source, strlen(source));
    key = fnv1a(key, compiler, strlen(compiler));
    free(header_text);

    char cache[4096];
    const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    if (getenv("XHEMU_CACHE_DIR")) {
        snprintf(cache, sizeof cache, "%s", getenv("XHEMU_CACHE_DIR"));
    } else {
        snprintf(cache, sizeof cache, "%s/xhal-cuda-emulator-cache", tmp);
    }
    make_folders(cache);
    char cached[4200];
    snprintf(cached, sizeof cached, "%s/%016llx.so", cache, (unsigned long long)key);
    free(program->image);
    program->image = (unsigned char *)read_file(cached, &program->image_size);
    if (program->image) {
        free(source);
        set_log(program, "");
        return NVRTC_SUCCESS;
    }

    char folder[4096];
    snprintf(folder, sizeof folder, "%s/xhal-cuda-emulator-XXXXXX", tmp);
    if (!mkdtemp(folder)) {
        free(source);
        set_log(program, "emulator " RTC_LIBRARY ": cannot make a build folder");
        return NVRTC_ERROR_INTERNAL_ERROR;
    }
    char source_path[4200], object_path[4200], log_path[4200];
    snprintf(source_path, sizeof source_path, "%s/module.cu", folder);
    snprintf(object_path, sizeof object_path, "%s/module.so", folder);
    snprintf(log_path, sizeof log_path, "%s/log.txt", folder);
    FILE *file = fopen(source_path, "wb");
    if (!file || fputs(source, file) < 0) {
        if (file) fclose(file);
        free(source);
        set_log(program, "emulator " RTC_LIBRARY ": cannot write the source");
        return NVRTC_ERROR_INTERNAL_ERROR;
    }
    fclose(file);
    free(source);

    /* posix_spawn rather than fork: the calling process has other threads (the streams'),
       and a forked child may not allocate before exec. */
    char *const arguments[] = {(char *)compiler, "-std=c++17", "-O1", "-fvisibility=hidden", "-fPIC", "-shared", "-w", "-include",
                               (char *)header, "-x", "c++", source_path, "-o", object_path, NULL};
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 2, log_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    posix_spawn_file_actions_adddup2(&actions, 2, 1);
    pid_t child;
    int status = -1;
    int spawned = posix_spawnp(&child, compiler, &actions, NULL, arguments, environ);
    posix_spawn_file_actions_destroy(&actions);
    if (spawned != 0) {
        FILE *log = fopen(log_path, "wb");
        if (log) {
            fprintf(log, "emulator " RTC_LIBRARY ": cannot run %s: %s\n", compiler, strerror(spawned));
            fclose(log);
        }
    } else if (waitpid(child, &status, 0) < 0) {
        status = -1;
    }
    char *log = read_file(log_path, NULL);
    set_log(program, log ? log : "");
    free(log);
    nvrtcResult result = NVRTC_SUCCESS;
    if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
        result = NVRTC_ERROR_COMPILATION;
    } else {
        program->image = (unsigned char *)read_file(object_path, &program->image_size);
        if (!program->image) {
            result = NVRTC_ERROR_INTERNAL_ERROR;
        } else {
            /* Into the cache under a name of its own first, so a reader never sees half a file. */
            char staged[4300];
            snprintf(staged, sizeof staged, "%s.%d", cached, (int)getpid());
            FILE *copy = fopen(staged, "wb");
            if (copy) {
                int written = fwrite(program->image, 1, program->image_size, copy) == program->image_size;
                if (fclose(copy) == 0 && written) rename(staged, cached);
                else unlink(staged);
            }
        }
    }
    if (!getenv("XHEMU_KEEP")) {
        unlink(source_path);
        unlink(object_path);
        unlink(log_path);
        rmdir(folder);
    }
    return result;
}

nvrtcResult RTC(GetProgramLogSize)(nvrtcProgram program, size_t *size) {
    if (!program || !size) return NVRTC_ERROR_INVALID_INPUT;
    *size = (program->log ? strlen(program->log) : 0) + 1;
    return NVRTC_SUCCESS;
}

nvrtcResult RTC(GetProgramLog)(nvrtcProgram program, char *log) {
    if (!program || !log) return NVRTC_ERROR_INVALID_INPUT;
    strcpy(log, program->log ? program->log : "");
    return NVRTC_SUCCESS;
}

nvrtcResult RTC_CODE_SIZE(nvrtcProgram program, size_t *size) {
    if (!program || !size) return NVRTC_ERROR_INVALID_INPUT;
    if (!program->image) return NVRTC_ERROR_INVALID_PROGRAM;
    *size = program->image_size;
    return NVRTC_SUCCESS;
}

nvrtcResult RTC_CODE(nvrtcProgram program, char *image) {
    if (!program || !image) return NVRTC_ERROR_INVALID_INPUT;
    if (!program->image) return NVRTC_ERROR_INVALID_PROGRAM;
    memcpy(image, program->image, program->image_size);
    return NVRTC_SUCCESS;
}

#ifndef XHEMU_HIPRTC
/* The emulator makes machine code for the host only; it has no PTX. */
nvrtcResult nvrtcGetPTXSize(nvrtcProgram program, size_t *size) {
    (void)program; (void)size;
    return NVRTC_ERROR_INVALID_PROGRAM;
}

nvrtcResult nvrtcGetPTX(nvrtcProgram program, char *ptx) {
    (void)program; (void)ptx;
    return NVRTC_ERROR_INVALID_PROGRAM;
}
#endif
