#ifndef CLIBFUZZER_H
#define CLIBFUZZER_H

#include <stddef.h>
#include <stdint.h>

/*
 * libFuzzer's entry point for programs that own main() (LLVM 11 and later;
 * defined in the runtime -sanitize=fuzzer links). SwiftPM 6 links every
 * executable target with main renamed to <module>_main, so the fuzz targets
 * define that symbol and start the fuzzer from it: libFuzzer's own main()
 * is then never linked.
 */
int LLVMFuzzerRunDriver(int *argc, char ***argv,
	int (*callback)(const uint8_t *data, size_t size));

#endif
