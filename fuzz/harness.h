// The contracts of the readers that face input, checked on any bytes. One
// function per reader, driven by its libFuzzer target (fuzz/<name>_fuzz.cc)
// and by the corpus replay test (fuzz/corpus_replay_test.cc) alike:
//   - any bytes give a value or an error whose message is one non-empty line;
//   - no exception escapes;
//   - what a reader accepts keeps the promises of its header (indexes in
//     range, sizes bounded, a model that validates), and where a writer
//     exists, the value survives a round trip through it unchanged.
// A broken contract goes to the failure handler: by default it prints the
// cause to stderr and aborts, which libFuzzer reports as a crash with the
// input and the stack.
//
// harness.cc (library unipool_fuzz_harness) holds the io readers' checks;
// server_harness.cc (unipool_fuzz_server_harness) the server's, so that the
// io targets build without the server.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace unipool::fuzz {

int FuzzClusterFile(const uint8_t* data, size_t size);  // io::ParseClusterSpec, Topology::Build
int FuzzJobSpec(const uint8_t* data, size_t size);      // io::ReadJobSpec, the stored form
int FuzzSimFile(const uint8_t* data, size_t size);      // io::ParseSimFile
int FuzzTrace(const uint8_t* data, size_t size);        // io::ParseTrace
int FuzzModelFile(const uint8_t* data, size_t size);    // io::ParseModelSpec
int FuzzReportLine(const uint8_t* data, size_t size);   // io::ParseReportLine, RankSignals
int FuzzTokenFile(const uint8_t* data, size_t size);    // server::TokenFile::Parse
int FuzzRecords(const uint8_t* data, size_t size);      // server/records.h readers of JSON

// Receives the cause of each broken contract instead of the default
// print-and-abort; the Fuzz* function then returns. nullptr restores the default.
using FailureHandler = void (*)(const std::string& cause);
void SetFailureHandler(FailureHandler handler);

}  // namespace unipool::fuzz
