// Transcript tests: scenario scripts in testdata/*.txt, one command per line, run against a TestCluster.
//
//   # comment
//   cluster voters=3 seed=1 [pre_vote=false] [check_quorum=false]
//   elect 1 | tick [count] | stabilize
//   propose 1 data | propose-fails 2 data
//   isolate 3 | cut 1 2 | heal | crash 2 | restart 2 | add-node 4
//   read 1 context | transfer 1 3 | snapshot 1
//   add-learner 1 4 | promote 1 4 | remove 1 3          (leader first, then the node)
//   expect 1 role=leader term=2 leader=1 commit=5 last=5 state=a,b reads=ctx@5 voters=1,2,3 learners=- snapshots=0
//
// `expect` checks only the keys it names; "-" is an empty list. A failing line reports file:line.
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "tests/unit/replication/raft_test_cluster.h"

namespace mayfly::replication::testing {
namespace {

std::vector<std::string> split(const std::string& text, char separator) {
  std::vector<std::string> parts;
  std::stringstream stream(text);
  std::string part;
  while (std::getline(stream, part, separator)) {
    if (!part.empty()) parts.push_back(part);
  }
  return parts;
}

std::string join_ids(const std::set<NodeId>& ids) {
  if (ids.empty()) return "-";
  std::string out;
  for (NodeId id : ids) out += (out.empty() ? "" : ",") + std::to_string(id.value());
  return out;
}

std::string join(const std::vector<std::string>& items) {
  if (items.empty()) return "-";
  std::string out;
  for (const std::string& item : items) out += (out.empty() ? "" : ",") + item;
  return out;
}

class TranscriptRunner {
 public:
  explicit TranscriptRunner(std::string path) : path_(std::move(path)) {}

  void run() {
    std::ifstream file(path_);
    ASSERT_TRUE(file.good()) << "cannot open " << path_;
    std::string line;
    int number = 0;
    while (std::getline(file, line)) {
      ++number;
      if (line.empty() || line[0] == '#') continue;
      SCOPED_TRACE(path_ + ":" + std::to_string(number) + ": " + line);
      execute(split(line, ' '));
      if (::testing::Test::HasFatalFailure()) return;
    }
  }

 private:
  NodeId node(const std::string& text) { return N(std::stoull(text)); }

  void execute(const std::vector<std::string>& words) {
    ASSERT_FALSE(words.empty());
    const std::string& command = words[0];
    if (command == "cluster") return make_cluster(words);
    ASSERT_NE(cluster_, nullptr) << "the first command must be `cluster`";
    TestCluster& cluster = *cluster_;
    auto arg = [&](size_t i) -> const std::string& {
      static const std::string kMissing;
      EXPECT_LT(i, words.size()) << "missing argument " << i;
      return i < words.size() ? words[i] : kMissing;
    };
    if (command == "elect") {
      cluster.elect(node(arg(1)));
    } else if (command == "tick") {
      cluster.tick_all(words.size() > 1 ? std::stoi(arg(1)) : 1);
    } else if (command == "stabilize") {
      cluster.stabilize();
    } else if (command == "propose") {
      cluster.propose(node(arg(1)), arg(2));
    } else if (command == "propose-fails") {
      EXPECT_FALSE(cluster.core(node(arg(1))).propose(arg(2)).is_ok());
    } else if (command == "isolate") {
      cluster.isolate(node(arg(1)));
    } else if (command == "cut") {
      cluster.cut(node(arg(1)), node(arg(2)));
    } else if (command == "heal") {
      cluster.heal();
    } else if (command == "crash") {
      cluster.crash(node(arg(1)));
    } else if (command == "restart") {
      cluster.restart(node(arg(1)));
    } else if (command == "add-node") {
      cluster.add_node(node(arg(1)), Membership{});
    } else if (command == "read") {
      EXPECT_TRUE(cluster.core(node(arg(1))).read_index(arg(2)).is_ok());
      cluster.stabilize();
    } else if (command == "transfer") {
      EXPECT_TRUE(cluster.core(node(arg(1))).transfer_leadership(node(arg(2))).is_ok());
      cluster.stabilize();
    } else if (command == "snapshot") {
      cluster.snapshot_and_compact(node(arg(1)));
    } else if (command == "add-learner" || command == "promote" || command == "remove") {
      const ConfigChangeType type = command == "add-learner" ? ConfigChangeType::kAddLearner
                                    : command == "promote"   ? ConfigChangeType::kPromoteLearner
                                                             : ConfigChangeType::kRemoveNode;
      Result<Proposal> proposal = cluster.core(node(arg(1))).propose_config_change({type, node(arg(2))});
      EXPECT_TRUE(proposal.is_ok()) << proposal.status().to_string();
      cluster.stabilize();
    } else if (command == "expect") {
      expect(node(arg(1)), std::vector<std::string>(words.begin() + 2, words.end()));
    } else {
      FAIL() << "unknown command " << command;
    }
  }

  void make_cluster(const std::vector<std::string>& words) {
    int voters = 3;
    uint64_t seed = 1;
    bool pre_vote = true;
    bool check_quorum = true;
    for (size_t i = 1; i < words.size(); ++i) {
      const std::vector<std::string> key_value = split(words[i], '=');
      ASSERT_EQ(key_value.size(), 2u) << words[i];
      const std::string& key = key_value[0];
      const std::string& value = key_value[1];
      if (key == "voters") {
        voters = std::stoi(value);
      } else if (key == "seed") {
        seed = std::stoull(value);
      } else if (key == "pre_vote") {
        pre_vote = value == "true";
      } else if (key == "check_quorum") {
        check_quorum = value == "true";
      } else {
        FAIL() << "unknown cluster option " << key;
      }
    }
    cluster_ = std::make_unique<TestCluster>(voters, seed, [pre_vote, check_quorum](RaftConfig& config) {
      config.pre_vote = pre_vote;
      config.check_quorum = check_quorum;
    });
  }

  void expect(NodeId id, const std::vector<std::string>& checks) {
    TestNode& test_node = cluster_->node(id);
    ASSERT_NE(test_node.core, nullptr) << "node " << id << " is down";
    const RaftStatus status = test_node.core->status();
    for (const std::string& check : checks) {
      const std::vector<std::string> key_value = split(check, '=');
      ASSERT_EQ(key_value.size(), 2u) << check;
      const std::string& key = key_value[0];
      const std::string& want = key_value[1];
      std::string actual;
      if (key == "role") {
        actual = std::string(role_name(status.role));
      } else if (key == "term") {
        actual = std::to_string(status.term.value());
      } else if (key == "leader") {
        actual = std::to_string(status.leader.value());
      } else if (key == "commit") {
        actual = std::to_string(status.commit.value());
      } else if (key == "last") {
        actual = std::to_string(status.last_index.value());
      } else if (key == "applied") {
        actual = std::to_string(status.applied.value());
      } else if (key == "state") {
        actual = join(test_node.state);
      } else if (key == "reads") {
        std::vector<std::string> reads;
        for (const ReadState& read : test_node.read_states) {
          reads.push_back(read.context + "@" + std::to_string(read.index.value()));
        }
        actual = join(reads);
      } else if (key == "voters") {
        actual = join_ids(status.membership.voters);
      } else if (key == "learners") {
        actual = join_ids(status.membership.learners);
      } else if (key == "snapshots") {
        actual = std::to_string(test_node.snapshots_installed);
      } else {
        FAIL() << "unknown expect key " << key;
      }
      EXPECT_EQ(actual, want) << "node " << id << " " << key;
    }
  }

  std::string path_;
  std::unique_ptr<TestCluster> cluster_;
};

std::vector<std::string> transcript_files() {
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(MAYFLY_REPLICATION_TESTDATA)) {
    if (entry.path().extension() == ".txt") files.push_back(entry.path().string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

TEST(Transcripts, EveryScriptInTestdataPasses) {
  const std::vector<std::string> files = transcript_files();
  ASSERT_FALSE(files.empty()) << "no transcripts in " << MAYFLY_REPLICATION_TESTDATA;
  for (const std::string& file : files) {
    TranscriptRunner(file).run();
  }
}

void run_wrong_transcript() {
  const std::string path = ::testing::TempDir() + "/mayfly_wrong_transcript.txt";
  {
    std::ofstream out(path);
    out << "cluster voters=3 seed=1\nelect 1\nexpect 1 role=follower\n";
  }
  TranscriptRunner(path).run();
}

// The runner must notice a wrong expectation, or the transcripts prove nothing.
TEST(Transcripts, AWrongExpectationFails) { EXPECT_NONFATAL_FAILURE(run_wrong_transcript(), "node 1 role"); }

}  // namespace
}  // namespace mayfly::replication::testing
