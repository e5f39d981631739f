// Reads a model file (YAML, `kind: Model`) into a perf::ModelSpec. Strict:
// unknown keys are errors; every error is one line "FILE:LINE:COL: field:
// cause". The format is documented in docs/plan.md:
//
//   apiVersion: unipool/v1
//   kind: Model
//   metadata: {name: llama3-70b}
//   spec:
//     base: llama3-70b        # optional: start from a built-in preset
//     layers: 80
//     hiddenSize: 8192
//     ffnHiddenSize: 28672
//     activation: swiglu      # gelu | swiglu
//     attentionHeads: 64
//     kvHeads: 8              # default: attentionHeads
//     headDim: 128            # default: hiddenSize / attentionHeads
//     vocabSize: 128256
//     seqLength: 8192
//     tiedEmbeddings: false
//     moe: {experts: 8, topK: 2, sharedExperts: 0, expertFfnHiddenSize: 14336,
//           denseLayers: 0}
#pragma once

#include <string>
#include <string_view>

#include "core/base/status.h"
#include "core/perf/model.h"

namespace unipool::io {

// Parses YAML text. Errors carry line and column, no file name.
Result<perf::ModelSpec> ParseModelSpec(std::string_view text);

// Reads and parses a file; errors start with "path:line:col: ".
Result<perf::ModelSpec> LoadModel(const std::string& path);

// `name_or_path`: a built-in preset name (llama3-70b, ...) or a model file.
Result<perf::ModelSpec> LoadModelOrPreset(const std::string& name_or_path);

}  // namespace unipool::io
