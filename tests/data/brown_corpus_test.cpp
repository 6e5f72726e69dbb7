// Brown corpus detokenisation on hand-written tagged text in the corpus's Form C layout.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "acc/data/brown_corpus.h"
#include "acc/util/error.h"

TEST(BrownCorpus, StripsTagsAndRebuildsSpacing) {
  const std::string tagged =
      "\n\n\tThe/at jury/nn said/vbd ``/`` no/at evidence/nn ''/'' ,/, and/cc left/vbd ./.\n"
      "It/pps cost/vbd $/nns 5/cd (/( or/cc 1/2/cd )/) ;/. Mr./np Jones/np '/' dog/nn ?/.\n"
      "\n\n\tHe/pps met/vbd Ivan/np Allen/np Jr./np ./.\n"
      "\n\nMerger/nn-hl proposed/vbn-hl\n"
      "However/rb ,/, no/at !/.\n";
  EXPECT_EQ(acc::data::brown_to_text(tagged),
            "The jury said \"no evidence\", and left. It cost $ 5 (or 1/2); Mr. Jones' dog?\n\n"
            "He met Ivan Allen Jr.\n\n"
            "Merger proposed\n\n"
            "However, no!");
}

TEST(BrownCorpus, DocumentListing) {
  const auto dir = std::filesystem::temp_directory_path() / "acc_test_data_brown";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  for (const char* name : {"cb02", "ca01", "README", "cats.txt", "cz01"}) std::ofstream(dir / name) << "x";
  const auto docs = acc::data::brown_documents(dir);
  ASSERT_EQ(docs.size(), 2u);
  EXPECT_EQ(docs[0].filename(), "ca01");
  EXPECT_EQ(docs[1].filename(), "cb02");
  EXPECT_THROW(acc::data::brown_documents(dir / "missing"), acc::Error);
}
