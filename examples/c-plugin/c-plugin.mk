# The C plugin (examples/c-plugin), included by the top-level Makefile. It needs only a C11
# compiler and include/xhal.h: no cargo, no Rust.
#
#   make c-plugin        target/c-plugin/libxhal_c-plugin.so
#   make c-plugin-check  that plugin through check_c_plugin (its kernels, streams, events, misuse)
#   make c-plugin-cts    xhal-cts on it; reports in target/cts/c-plugin (part of `make cts`)
#   make c-plugin-asan   both built with AddressSanitizer and UBSan: check_c_plugin with leak
#                        detection, then xhal-cts on the sanitized plugin
#
# The plugin stays out of target/plugins on purpose: its device is a CPU that takes no WGSL,
# and in that folder it would be discovered before libxhal_cpu.so and chosen by default by the
# demos and by anything else searching target/plugins. Put target/c-plugin on XHAL_PLUGIN_PATH
# to use it.
CC ?= cc
C_PLUGIN_SOURCE := examples/c-plugin/c_plugin.c
C_PLUGIN_CHECK_SOURCE := examples/c-plugin/check_c_plugin.c
C_PLUGIN_CFLAGS := -std=c11 -pedantic -Wall -Wextra -Werror -I include
C_PLUGIN_SHARED := -fPIC -shared -fvisibility=hidden
C_PLUGIN_SANITIZE := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer -g -O1
C_PLUGIN_DIR := target/c-plugin
C_PLUGIN_ASAN_DIR := target/c-plugin-asan

.PHONY: c-plugin c-plugin-check c-plugin-cts c-plugin-asan

c-plugin: $(C_PLUGIN_DIR)/libxhal_c-plugin.so

$(C_PLUGIN_DIR)/libxhal_c-plugin.so: $(C_PLUGIN_SOURCE) include/xhal.h
	@mkdir -p $(dir $@)
	$(CC) $(C_PLUGIN_CFLAGS) -O2 $(C_PLUGIN_SHARED) -o $@ $(C_PLUGIN_SOURCE) -lpthread

$(C_PLUGIN_DIR)/check_c_plugin: $(C_PLUGIN_CHECK_SOURCE) include/xhal.h
	@mkdir -p $(dir $@)
	$(CC) $(C_PLUGIN_CFLAGS) -O2 -o $@ $(C_PLUGIN_CHECK_SOURCE) -ldl

c-plugin-check: $(C_PLUGIN_DIR)/libxhal_c-plugin.so $(C_PLUGIN_DIR)/check_c_plugin
	$(C_PLUGIN_DIR)/check_c_plugin $(C_PLUGIN_DIR)/libxhal_c-plugin.so

# xhal-cts comes from the workspace build (the same command as `make build`, so that cargo
# resolves the same features and finds it built).
c-plugin-cts: $(C_PLUGIN_DIR)/libxhal_c-plugin.so
	$(CARGO) build --release --workspace
	target/release/xhal-cts run --plugin $(C_PLUGIN_DIR)/libxhal_c-plugin.so --report target/cts/c-plugin

# The sanitized plugin keeps the file name the loader requires, in a folder of its own.
$(C_PLUGIN_ASAN_DIR)/libxhal_c-plugin.so: $(C_PLUGIN_SOURCE) include/xhal.h
	@mkdir -p $(dir $@)
	$(CC) $(C_PLUGIN_CFLAGS) $(C_PLUGIN_SANITIZE) $(C_PLUGIN_SHARED) -o $@ $(C_PLUGIN_SOURCE) -lpthread

$(C_PLUGIN_ASAN_DIR)/check_c_plugin: $(C_PLUGIN_CHECK_SOURCE) include/xhal.h
	@mkdir -p $(dir $@)
	$(CC) $(C_PLUGIN_CFLAGS) $(C_PLUGIN_SANITIZE) -o $@ $(C_PLUGIN_CHECK_SOURCE) -ldl

# check_c_plugin is C, built with the sanitizers itself, so every allocation the plugin makes
# is tracked and a leak fails it. xhal-cts is a Rust program that dlopens the plugin, so the
# ASan runtime is loaded first (LD_PRELOAD). Its test workers exit normally, which runs the leak
# check, but the runner does not read their exit status: every sanitizer report goes to a file
# under $(C_PLUGIN_ASAN_REPORTS) instead, and any such file fails the target. The one leak
# suppressed (examples/c-plugin/lsan.supp) is the host's own, deliberate one.
C_PLUGIN_ASAN_REPORTS := target/cts/c-plugin-asan/sanitizer-reports
C_PLUGIN_ASAN_OPTIONS := ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:log_path=$(CURDIR)/$(C_PLUGIN_ASAN_REPORTS)/asan \
	UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1:log_path=$(CURDIR)/$(C_PLUGIN_ASAN_REPORTS)/ubsan \
	LSAN_OPTIONS=suppressions=$(CURDIR)/examples/c-plugin/lsan.supp:print_suppressions=0

c-plugin-asan: $(C_PLUGIN_ASAN_DIR)/libxhal_c-plugin.so $(C_PLUGIN_ASAN_DIR)/check_c_plugin
	$(CARGO) build --release --workspace
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
		$(C_PLUGIN_ASAN_DIR)/check_c_plugin $(C_PLUGIN_ASAN_DIR)/libxhal_c-plugin.so
	@rm -rf $(C_PLUGIN_ASAN_REPORTS) && mkdir -p $(C_PLUGIN_ASAN_REPORTS)
	LD_PRELOAD=$$($(CC) -print-file-name=libasan.so) $(C_PLUGIN_ASAN_OPTIONS) \
		target/release/xhal-cts run --plugin $(C_PLUGIN_ASAN_DIR)/libxhal_c-plugin.so \
		--report target/cts/c-plugin-asan
	@if [ -n "$$(ls -A $(C_PLUGIN_ASAN_REPORTS))" ]; then \
		cat $(C_PLUGIN_ASAN_REPORTS)/*; \
		echo "FAILED: the sanitizers reported errors in xhal-cts's workers (above; files in $(C_PLUGIN_ASAN_REPORTS))" >&2; \
		exit 1; \
	fi
	@echo "c-plugin-asan: check_c_plugin and xhal-cts ran clean under AddressSanitizer, LeakSanitizer and UBSan"
