// KneeSearch and GridSearch on synthetic curves: the shape of the simulator's
// (and MindIE's) throughput over maxBatchSize, B / (a + b B) below the knee,
// with preemptions and a fall past it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <optional>
#include <random>

#include "controller/search/knee_probes.h"
#include "controller/search/knee_reading.h"
#include "controller/search/search.h"
#include "controller/search/testing/trials.h"

namespace crest::controller {
namespace {

using ::testing::Each;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Lt;
using Kind = PointOutcome::Kind;
using testing_trials::NotOk;

// A search's range [lo, hi], the practice's start and the predicted knee.
SearchSpace Space(int64_t lo, int64_t hi, int64_t initial, int64_t knee_guess) {
  SearchSpace s;
  s.lo = lo;
  s.hi = hi;
  s.initial = initial;
  s.knee_guess = knee_guess;
  return s;
}

// The reference case: range [362, 1088], practice start 435, knee at 575.
SearchSpace Reference() { return Space(362, 1088, 435, 608); }

constexpr int64_t kKnee = 575;

// Rises as B / (39 + 0.095 B) (the calibrated decode step) up to the knee;
// past it 6 preemptions per sequence, each adding its recompute to the time
// per token: about 0.5% less throughput per sequence.
double Rising(int64_t b) { return 1000.0 * static_cast<double>(b) / (39 + 0.095 * b); }
int64_t Preemptions(int64_t b) { return b <= kKnee ? 0 : 6 * (b - kKnee); }
double Curve(int64_t b) {
  return 1 / (1 / Rising(b) + 1.4e-7 * static_cast<double>(Preemptions(b)));
}
PointOutcome Measured(double v, std::optional<int64_t> preemptions) {
  PointOutcome o;
  o.objective = v;
  o.samples = {v};
  o.preemptions = preemptions;
  return o;
}
PointOutcome WithSignal(int64_t b) { return Measured(Curve(b), Preemptions(b)); }
PointOutcome NoSignal(int64_t b) { return Measured(Curve(b), std::nullopt); }

struct Played {
  std::vector<int64_t> runs;  // every benchmark run, in order
  size_t rounds = 0;
  std::string reason;
  std::optional<SearchAnswer> answer;
};

// Plays `search` in synchronous rounds of at most `nodes` runs; `measure(b,
// repeat)` is one benchmark run.
Played Play(const SearchStrategy& search, const SearchSpace& space,
            const std::function<PointOutcome(int64_t, size_t)>& measure, size_t nodes = 1) {
  Played out;
  Outcomes finished;
  for (int guard = 0; guard < 100; ++guard) {
    SearchDecision d = search.Decide(space, finished, nodes);
    if (d.done) {
      out.reason = d.reason;
      out.answer = search.Best(space, finished);
      return out;
    }
    std::vector<int64_t> round;
    for (int64_t p : d.wanted) {
      size_t want = d.runs.count(p) != 0 ? d.runs.at(p) : 1;
      for (size_t have = finished.count(p) != 0 ? finished.at(p).runs : 0;
           have < want && round.size() < nodes; ++have) {
        round.push_back(p);
      }
    }
    EXPECT_FALSE(round.empty()) << "a decision that is not done wants nothing";
    if (round.empty()) break;
    ++out.rounds;
    for (int64_t p : round) {
      out.runs.push_back(p);
      auto it = finished.find(p);
      PointOutcome m = measure(p, it == finished.end() ? 0 : it->second.runs);
      if (it == finished.end()) {
        finished[p] = m;
        continue;
      }
      it->second.samples.push_back(m.samples.at(0));
      ++it->second.runs;
      double sum = 0;
      for (double v : it->second.samples) sum += v;
      it->second.objective = sum / static_cast<double>(it->second.samples.size());
    }
  }
  ADD_FAILURE() << "search did not end";
  return out;
}

TEST(KneeSearch, UnimodalWithPreemptionsBisectsToTheKnee) {
  KneeSearch search;
  Played p = Play(search, Reference(), [](int64_t b, size_t) { return WithSignal(b); });
  // Around the guess (608, past), stepping down to 584 (past) and 560 (below);
  // the model's check at the practice's start (435: well below, as it must
  // be); then halving [560, 584] to 1% (5 sequences): 572, 578, 575; 575
  // again to confirm.
  EXPECT_THAT(p.runs, ElementsAre(608, 584, 560, 435, 572, 578, 575, 575));
  ASSERT_TRUE(p.answer.has_value());
  EXPECT_EQ(p.answer->point, kKnee);
  EXPECT_EQ(p.answer->runs, 2u);
  EXPECT_THAT(p.reason, HasSubstr("knee between 575 and 578 (18 preemptions)"));
  // Noise-free repeats: a measured noise of 0.
  EXPECT_EQ(p.answer->noise, 0.0);
}

TEST(KneeSearch, FourNodesTakeFewerRounds) {
  KneeSearch search;
  Played one = Play(
      search, Reference(), [](int64_t b, size_t) { return WithSignal(b); }, 1);
  Played four = Play(
      search, Reference(), [](int64_t b, size_t) { return WithSignal(b); }, 4);
  EXPECT_EQ(one.rounds, 8u);  // the model's check takes a round of its own
  EXPECT_EQ(four.rounds, 3u);
  // First round: four points 4% apart around the guess.
  EXPECT_THAT(std::vector<int64_t>(four.runs.begin(), four.runs.begin() + 4),
              ElementsAre(572, 596, 620, 644));
  ASSERT_TRUE(four.answer.has_value());
  EXPECT_GE(four.answer->point, kKnee - 5);
  EXPECT_LE(four.answer->point, kKnee);
}

TEST(KneeSearch, FlatTopTakesAnyPointOfThePlateau) {
  // Flat from 500 to the knee at 700: the largest point without preemptions
  // that the noise cannot tell from the best.
  KneeSearch search;
  SearchSpace s = Reference();
  auto flat = [](int64_t b, size_t) {
    const double v = b < 500 ? 90 + 0.02 * (b - 362) : 100;
    return b <= 700 ? Measured(v, 0) : Measured(60, 10 * (b - 700));
  };
  Played p = Play(search, s, flat);
  ASSERT_TRUE(p.answer.has_value());
  EXPECT_GE(p.answer->point, 693);
  EXPECT_LE(p.answer->point, 700);
  EXPECT_EQ(p.answer->objective, 100);
  EXPECT_LE(p.runs.size(), 9u);  // with the model's check
}

TEST(KneeSearch, CliffAtTheKneeOnThroughputAlone) {
  // No preemption signal: a fall of 30% past the knee is found by throughput.
  KneeSearch search;
  auto cliff = [](int64_t b, size_t) {
    return Measured(b <= kKnee ? Rising(b) : 0.7 * Rising(kKnee), std::nullopt);
  };
  Played p = Play(search, Reference(), cliff);
  ASSERT_TRUE(p.answer.has_value());
  EXPECT_GE(p.answer->point, kKnee - 5);
  EXPECT_LE(p.answer->point, kKnee);
  EXPECT_THAT(p.reason, HasSubstr("throughput peaks at"));
}

TEST(KneeSearch, WithoutPreemptionSignalAGentleFallStillEndsNearThePeak) {
  KneeSearch search;
  Played p = Play(search, Reference(), [](int64_t b, size_t) { return NoSignal(b); });
  ASSERT_TRUE(p.answer.has_value());
  // A fall of 0.5% per sequence hides in the noise band for a few sequences;
  // the best mean is taken, within 2% of the peak.
  EXPECT_GE(Curve(p.answer->point), 0.98 * Curve(kKnee));
  // The bracket narrows to 3% of the batch (kPeakResolution), or ends level.
  EXPECT_LE(p.runs.size(), 10u);
}

TEST(KneeSearch, NoisyRunsStayNearThePeakAndRepeatOnlyTheAnswer) {
  KneeSearch search;
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<double> noise(0, 0.02);
    Played p = Play(search, Reference(), [&](int64_t b, size_t) {
      PointOutcome o = WithSignal(b);
      o.objective *= 1 + noise(rng);
      o.samples = {o.objective};
      return o;
    });
    ASSERT_TRUE(p.answer.has_value());
    // The preemption count decides the knee: noise moves nothing.
    EXPECT_EQ(p.answer->point, kKnee) << "seed " << seed;
    // Eight runs with the model's check, nine when a run past the knee
    // measures beyond the band by chance (it is then confirmed, and falls
    // back), ten when the check's run reads as high as the knee's and the two
    // are settled: never past one node's budget.
    EXPECT_GE(p.runs.size(), 8u) << "seed " << seed;
    EXPECT_LE(p.runs.size(), 10u) << "seed " << seed;
    ASSERT_TRUE(p.answer->noise.has_value());
    EXPECT_GT(*p.answer->noise, 0);
  }
}

TEST(KneeSearch, InfeasibleTailCapsTheRangeAndTheSearchGoesOnBelow) {
  // Out of memory at start-up from 590 up; no preemptions below it and a
  // curve that still rises there.
  KneeSearch search;
  auto oom = [](int64_t b, size_t) {
    if (b >= 590) return NotOk(Kind::kInfeasible, "NPU out of memory");
    return Measured(Rising(b), 0);
  };
  Played p = Play(search, Reference(), oom);
  ASSERT_TRUE(p.answer.has_value()) << ::testing::PrintToString(p.runs);
  EXPECT_GE(p.answer->point, 584);
  EXPECT_LE(p.answer->point, 589);
  EXPECT_THAT(p.reason, HasSubstr("infeasible: NPU out of memory"))
      << ::testing::PrintToString(p.runs);
}

TEST(KneeSearch, AnOkPointAboveAFailureIsReadAsPastTheCap) {
  // A failure below points that measured ok (a daemon that died once at
  // 865, then served 899): without a preemption signal the best ok point
  // lay above the cap, the peak's right width came out negative and the
  // probe count wrapped around (the search allocated until it ran out of
  // memory). Points at or above the lowest failure are infeasible to the
  // search, as to its answer.
  KneeSearch search;
  SearchSpace s = Space(10, 1239, 1136, 816);
  s.max_points = 21;
  Outcomes finished;
  finished[800] = Measured(1000, std::nullopt);
  finished[832] = Measured(1010, std::nullopt);
  finished[899] = Measured(1100, std::nullopt);
  finished[865] = NotOk(Kind::kFailed, "daemon exited");
  SearchDecision d = search.Decide(s, finished, 2);
  EXPECT_THAT(d.wanted, Each(Lt(865)));
  EXPECT_LE(d.wanted.size(), 2u);
  std::optional<SearchAnswer> best = search.Best(s, finished);
  ASSERT_TRUE(best.has_value());
  EXPECT_EQ(best->point, 832);
}

TEST(KneeSearch, NoKneeInTheRangeEndsAtItsTop) {
  KneeSearch search;
  SearchSpace s = Reference();
  s.hi = 560;
  Played p = Play(search, s, [](int64_t b, size_t) { return WithSignal(b); });
  ASSERT_TRUE(p.answer.has_value());
  EXPECT_EQ(p.answer->point, 560);
  EXPECT_THAT(p.reason, HasSubstr("no knee up to the range's end (560)"));
}

TEST(KneeSearch, FlaggedRunsAreNeverTheAnswer) {
  KneeSearch search;
  Played p = Play(search, Reference(), [](int64_t b, size_t) {
    PointOutcome o = WithSignal(b);
    o.untrusted = b == 575;
    if (o.untrusted) o.samples.clear();
    return o;
  });
  ASSERT_TRUE(p.answer.has_value());
  EXPECT_NE(p.answer->point, 575);
  EXPECT_GE(p.answer->point, 570);
}

// The e2e test's case: a benchmark of few requests per client, whose last
// wave fills the batch only at some sizes, measures a point past the knee
// 6% above it. What is measured beyond the noise band wins over the model;
// within the band the knee rule stands.
TEST(KneeSearch, AMeasuredGainBeyondTheBandOverrulesTheModel) {
  KneeSearch search;
  auto measured = [](double bump) {
    Outcomes finished;
    for (int64_t b : {560, 572, 575, 578, 584, 608}) finished[b] = WithSignal(b);
    PointOutcome& knee = finished[575];
    knee.samples = {Curve(575), Curve(575)};
    knee.runs = 2;
    PointOutcome& bumped = finished[584];
    bumped.objective = Curve(575) * bump;
    bumped.samples = {bumped.objective};
    return finished;
  };
  std::optional<SearchAnswer> beyond = search.Best(Reference(), measured(1.10));
  ASSERT_TRUE(beyond.has_value());
  EXPECT_EQ(beyond->point, 584);
  std::optional<SearchAnswer> within = search.Best(Reference(), measured(1.01));
  ASSERT_TRUE(within.has_value());
  EXPECT_EQ(within->point, kKnee);
}

// A point past the knee whose first two runs measure 8% high: they overrule
// the cost model, which ranks the knee first. On one node a third run of
// each settles it: an unlucky pair falls back to the knee; a gain that every
// run shows stands (the model cannot see everything a run measures).
TEST(KneeSearch, RunsThatOverruleTheModelAreSettledByAThirdRunOfEach) {
  KneeSearch search;
  // A range with no room for the model's check below the knee: the settling
  // runs are what is tested, within the budget the check would share.
  SearchSpace space = Reference();
  space.lo = 540;
  constexpr int64_t kBumped = 584;
  auto bumped_runs = [&](size_t bumped) {
    return [=](int64_t b, size_t repeat) {
      PointOutcome o = WithSignal(b);
      if (b == kBumped && repeat < bumped) {
        o.objective = Curve(kKnee) * 1.08;
        o.samples = {o.objective};
      }
      return o;
    };
  };
  Played unlucky = Play(search, space, bumped_runs(2));
  ASSERT_TRUE(unlucky.answer.has_value());
  EXPECT_EQ(unlucky.answer->point, kKnee) << ::testing::PrintToString(unlucky.runs);
  EXPECT_EQ(std::count(unlucky.runs.begin(), unlucky.runs.end(), kBumped), 3);
  EXPECT_EQ(std::count(unlucky.runs.begin(), unlucky.runs.end(), kKnee), 3);
  EXPECT_LE(unlucky.runs.size(), 10u);

  Played real = Play(search, space, bumped_runs(3));
  ASSERT_TRUE(real.answer.has_value());
  EXPECT_EQ(real.answer->point, kBumped) << ::testing::PrintToString(real.runs);
  EXPECT_LE(real.runs.size(), 10u);

  // On several nodes the confirming round is the last: no settling runs.
  Played two = Play(search, Reference(), bumped_runs(2), /*nodes=*/2);
  EXPECT_LE(std::count(two.runs.begin(), two.runs.end(), kBumped), 2);
}

// LLaMa2-13B's shape at MaxOutputLen 256 (search-bench --curves): a small
// cache per sequence makes preemptions cheap, so throughput keeps rising on
// a plateau past the knee (95) until the preemptions, growing with the
// square of the overshoot, cost more than the larger batch gains: the peak
// is at 109, 2.5% above the knee.
constexpr int64_t kPlateauKnee = 95;
SearchSpace PlateauSpace() { return Space(87, 174, 87, 91); }
int64_t PlateauPreemptions(int64_t b) {
  return b <= kPlateauKnee ? 0 : (b - kPlateauKnee) * (b - kPlateauKnee);
}
double Plateau(int64_t b) {
  const auto x = static_cast<double>(b);
  return 1 / (0.039 / x + 0.0006 + 1.17e-7 * static_cast<double>(PlateauPreemptions(b)));
}
int64_t PlateauPeak() {
  int64_t best = 87;
  for (int64_t b = 87; b <= 174; ++b) best = Plateau(b) > Plateau(best) ? b : best;
  return best;
}

TEST(KneeSearch, APlateauPastTheKneeIsScannedToItsFall) {
  ASSERT_EQ(PlateauPeak(), 109);
  KneeSearch search;
  Played p = Play(search, PlateauSpace(),
                  [](int64_t b, size_t) { return Measured(Plateau(b), PlateauPreemptions(b)); });
  // The knee bracketed (91 below, 95 past); 95 has not fallen, so steps of 4%
  // scan the plateau before any bisection, until the cost fit turns (past
  // 109) with a point preempting once per two sequences at least. The fit
  // then places the peak at 109, above the bracket: the knee is never
  // bisected, and the runs go to the model's optimum and its confirmation.
  // Without the scan the search would end at the knee, 97.6% of the peak.
  EXPECT_THAT(p.runs, ElementsAre(91, 95, 99, 103, 107, 111, 109, 109));
  EXPECT_LT(Plateau(kPlateauKnee), 0.98 * Plateau(109));
  ASSERT_TRUE(p.answer.has_value());
  EXPECT_EQ(p.answer->point, 109);
  EXPECT_THAT(p.reason, HasSubstr("knee between 95 and 99, peak up the plateau at 109"));
}

TEST(KneeSearch, FourNodesScanAPlateauInOneRoundAndEndInThree) {
  KneeSearch search;
  Played p = Play(
      search, PlateauSpace(),
      [](int64_t b, size_t) { return Measured(Plateau(b), PlateauPreemptions(b)); }, 4);
  // Around the guess (93 below, 96 past and not fallen); the plateau scanned
  // in one round of four instead of bisecting the knee; the answer confirmed
  // with its three rivals in the same round.
  EXPECT_THAT(p.runs, ElementsAre(87, 89, 93, 96, 100, 104, 108, 112, 108, 112, 104, 100));
  EXPECT_EQ(p.rounds, 3u);
  ASSERT_TRUE(p.answer.has_value());
  EXPECT_GE(Plateau(p.answer->point), 0.995 * Plateau(109));
}

// The order of the work past a bracketed knee. When the point past it has
// not fallen beyond the noise band, the peak may lie up a plateau, where a
// finer knee gains nothing: the search scans up first. When it has fallen
// (a cliff), the peak is at the knee: the bracket is bisected.
TEST(KneeSearch, ABracketWhosePastPointHasNotFallenScansBeforeBisecting) {
  KneeSearch search;
  Outcomes finished;
  finished[91] = Measured(Plateau(91), 0);
  finished[99] = Measured(Plateau(99), PlateauPreemptions(99));
  SearchDecision plateau = search.Decide(PlateauSpace(), finished, 1);
  EXPECT_THAT(plateau.wanted, ElementsAre(103));  // 99 + 4%
  // The same bracket with 99 measured 10% low: beyond the band of two runs
  // of 2% noise, a fall. Halve the bracket.
  finished[99].objective = 0.9 * Plateau(99);
  finished[99].samples = {finished[99].objective};
  SearchDecision cliff = search.Decide(PlateauSpace(), finished, 1);
  EXPECT_THAT(cliff.wanted, ElementsAre(95));
}

// A flat top past the knee: throughput exactly level from the knee (95) to
// 115 while the preemptions grow, then a fall. Any point of the plateau is
// a right answer; the knee itself is one, and the search must not leave the
// plateau for the fall beyond it.
TEST(KneeSearch, AFlatTopPastTheKneeEndsOnThePlateau) {
  KneeSearch search;
  auto flat = [](int64_t b, size_t) {
    const double v = b <= 115 ? Plateau(std::min<int64_t>(b, kPlateauKnee))
                              : Plateau(kPlateauKnee) * (1 - 0.02 * static_cast<double>(b - 115));
    return Measured(v, PlateauPreemptions(b));
  };
  Played p = Play(search, PlateauSpace(), flat);
  // 99 past the knee has not fallen: scan to 103, where the fit (a level
  // curve while the preemptions grow: it has turned) places the peak at 99,
  // the bracket's past point. 103 has not fallen at all at 0.6 preemptions
  // per sequence: preemptions are cheap, so instead of halving the knee the
  // search anchors the fit below it (87, the range's low end), and the fit
  // keeps 99, which is confirmed.
  EXPECT_THAT(p.runs, ElementsAre(91, 95, 99, 103, 87, 99));
  ASSERT_TRUE(p.answer.has_value()) << ::testing::PrintToString(p.runs);
  EXPECT_EQ(p.answer->point, 99);
  EXPECT_EQ(p.answer->objective, Plateau(kPlateauKnee));
  EXPECT_THAT(p.reason, HasSubstr("knee between 95 and 99, preemptions cheap past it"));
}

// Throughput past its peak only falls: once a point above the best mean's
// has fallen beyond the band, the scan is over, even when a higher point of
// the same round read high. On four nodes a scan round measures four
// points; judged by the largest alone, a high reading there would take the
// search a round further up, past the budget of rounds. A higher reading
// beyond the band contradicts the fall.
TEST(KneeSearch, AFallAboveTheBestEndsTheScanWhateverAHigherPointRead) {
  KneeSearch search;
  Outcomes finished;
  for (int64_t b : {87, 89, 93}) finished[b] = Measured(Plateau(b), 0);
  finished[96] = Measured(Plateau(109), PlateauPreemptions(96));  // the best mean
  // 100 fell beyond the band of two single runs of 2% noise (5.7%); 112
  // reads 4.3% above it, inside that band, so nothing contradicts the fall.
  finished[100] = Measured(0.93 * Plateau(109), PlateauPreemptions(100));
  finished[104] = Measured(0.95 * Plateau(109), PlateauPreemptions(104));
  finished[108] = Measured(0.95 * Plateau(109), PlateauPreemptions(108));
  finished[112] = Measured(0.97 * Plateau(109), PlateauPreemptions(112));
  // The dip at 100 and the rise to 112 do not let the cost fit turn, so
  // judged by 112 alone the scan went on with a round of 116 to 128.
  SearchDecision d = search.Decide(PlateauSpace(), finished, 4);
  ASSERT_FALSE(d.done) << d.reason;
  EXPECT_THAT(d.wanted, Each(Lt(112))) << ::testing::PrintToString(d.wanted);
  // 112 reading 6.5% above the fall, beyond the band, contradicts it (a
  // node that differs, a busy neighbour): the largest point decides, as
  // before, and it has not fallen, so the scan steps on.
  finished[112] = Measured(0.99 * Plateau(109), PlateauPreemptions(112));
  SearchDecision contradicted = search.Decide(PlateauSpace(), finished, 4);
  EXPECT_THAT(contradicted.wanted, ElementsAre(116, 120, 124, 128));
}

// Cheap preemptions past the knee, and runs just below it that read high
// (the runs of one search-bench play of LLaMa2-13B npuMemSize 24
// MaxOutputLen 256: knee between 134 and 135, peak at 146, 98.37% at 136;
// decision 0024 says which). The fit sees too little
// rise below the knee and places the peak inside the bracket; bisecting it
// would pack the runs where the plateau starts. One node measures an anchor
// at 0.9 x the knee instead, and the fit, given the rise, answers up the
// plateau. A point past the knee that falls steeply per preemption is a
// cliff: the bracket is bisected as before.
SearchSpace SmallCacheSpace() { return Space(122, 245, 122, 129); }
TEST(KneeSearch, CheapPreemptionsAnchorTheFitBelowTheKneeInsteadOfBisecting) {
  KneeSearch search;
  // The play's runs: 129 and 134 read 2.7% and 1.7% high.
  Outcomes finished;
  finished[129] = Measured(844, 0);
  finished[134] = Measured(850, 0);
  finished[139] = Measured(839, 23);
  finished[145] = Measured(859, 64);
  finished[151] = Measured(817, 156);  // 3.9% below 850 at 1.03 preemptions per sequence
  SearchDecision anchor = search.Decide(SmallCacheSpace(), finished, 1);
  EXPECT_THAT(anchor.wanted, ElementsAre(122));  // max(lo, 0.9 x 134)

  // The anchor measured (the play read 799 there, about its noise-free
  // throughput): no bisection; the fit, given the rise, ranks 139 first, up
  // the plateau (98.6% of the peak, where bisecting answered 136, 98.37%),
  // and its confirming run goes there.
  finished[122] = Measured(799, 0);
  SearchDecision next = search.Decide(SmallCacheSpace(), finished, 1);
  ASSERT_FALSE(next.done) << next.reason;
  EXPECT_THAT(next.wanted, ElementsAre(139));
  std::optional<SearchAnswer> answer = search.Best(SmallCacheSpace(), finished);
  ASSERT_TRUE(answer.has_value());
  EXPECT_EQ(answer->point, 139);

  // On several nodes the runs on either side of the knee may come from
  // nodes of different speeds: the bracket is split as before (in three on
  // two nodes).
  finished.erase(122);
  SearchDecision two = search.Decide(SmallCacheSpace(), finished, 2);
  EXPECT_THAT(two.wanted, ElementsAre(136, 137));

  // 151 fallen 18% at 1.03 preemptions per sequence: preemptions are dear,
  // the peak is at the knee, and the bracket is halved.
  finished[151] = Measured(700, 156);
  SearchDecision cliff = search.Decide(SmallCacheSpace(), finished, 1);
  EXPECT_THAT(cliff.wanted, ElementsAre(137));
}

TEST(KneeSearch, KNodesShareTheStepOut) {
  // Four points below the knee: the next four step on by 4% each (the
  // span so far over four being less), not by the span each.
  KneeSearch search;
  Outcomes finished;
  for (int64_t b : {572, 596, 620, 644}) finished[b] = Measured(Rising(b), 0);
  SearchDecision d = search.Decide(Reference(), finished, 4);
  EXPECT_THAT(d.wanted, ElementsAre(670, 696, 721, 747));
  // One node doubles: the span measured so far.
  SearchDecision one = search.Decide(Reference(), finished, 1);
  EXPECT_THAT(one.wanted, ElementsAre(716));
}

TEST(KneeSearch, FreeNodesRepeatTheRivalsWithTheAnswer) {
  // The knee located between 575 and 578; on throughput the band cannot tell
  // 560, 572 and 575 apart. One node confirms the answer only; three confirm
  // it and repeat its two rivals in the same round.
  KneeSearch search;
  Outcomes finished;
  for (int64_t b : {560, 572, 575, 578, 584, 608}) finished[b] = WithSignal(b);
  SearchDecision one = search.Decide(Reference(), finished, 1);
  // One node checks the model at the practice's start first.
  EXPECT_THAT(one.wanted, ElementsAre(435));
  finished[435] = WithSignal(435);
  one = search.Decide(Reference(), finished, 1);
  EXPECT_THAT(one.wanted, ElementsAre(575));
  finished.erase(435);
  SearchDecision three = search.Decide(Reference(), finished, 3);
  EXPECT_THAT(three.wanted, ElementsAre(575, 572, 560));
  for (int64_t b : three.wanted) EXPECT_EQ(three.runs.at(b), 2u);
}

TEST(KneeSearch, ARoundOfRepeatsEndsTheSearchOnSeveralNodes) {
  // Three repeats spent (a confirming round of three nodes) and the answer,
  // 575, measured once: the band could not tell it from the repeated points,
  // so three nodes end the search; four have not filled a round of repeats.
  KneeSearch search;
  Outcomes finished;
  for (int64_t b : {560, 572, 575, 578, 584, 608}) finished[b] = WithSignal(b);
  for (int64_t b : {560, 572, 608}) {
    finished[b].samples.push_back(finished[b].objective);
    finished[b].runs = 2;
  }
  SearchDecision three = search.Decide(Reference(), finished, 3);
  EXPECT_TRUE(three.done);
  EXPECT_THAT(three.reason, HasSubstr("best 575"));
  SearchDecision four = search.Decide(Reference(), finished, 4);
  EXPECT_FALSE(four.done);
  EXPECT_THAT(four.wanted, ::testing::Contains(575));
}

TEST(KneeSearch, EightNodeSlotsMeasureTheKneesWindowInOneRound) {
  // A wide round (eight node_slots): eight points 2% apart from 4% below the
  // guess to 10% above it bracket the knee to the round's spacing, and the
  // preemptions settle the answer without a round of repeats.
  KneeSearch search;
  SearchSpace s = Reference();
  s.knee_guess = 560;
  Played p = Play(
      search, s, [](int64_t b, size_t) { return WithSignal(b); }, 8);
  EXPECT_EQ(p.rounds, 1u);
  EXPECT_THAT(p.runs, ElementsAre(538, 549, 560, 571, 582, 594, 605, 616));
  ASSERT_TRUE(p.answer.has_value());
  EXPECT_EQ(p.answer->point, 571);
  EXPECT_EQ(p.answer->runs, 1u);
  EXPECT_THAT(p.reason, HasSubstr("knee between 571 and 582"));
  // Seven node_slots make a narrow round: 4% apart, more rounds to the knee.
  Played seven = Play(
      search, s, [](int64_t b, size_t) { return WithSignal(b); }, 7);
  EXPECT_GT(seven.rounds, 1u);
}

TEST(KneeSearch, AKneeBelowTheWideWindowTakesAnotherRound) {
  // The guess 6% above the knee: every point of the window is past it, so
  // the next round steps down at the window's spacing (the knee most likely
  // lies just below it) and brackets the knee to that spacing.
  KneeSearch search;
  Played p = Play(
      search, Reference(), [](int64_t b, size_t) { return WithSignal(b); }, 8);
  EXPECT_THAT(p.runs, ElementsAre(584, 596, 608, 620, 632, 644, 657, 669,  //
                                  572, 561, 549, 537, 526, 514, 502, 491));
  EXPECT_EQ(p.rounds, 2u);
  ASSERT_TRUE(p.answer.has_value());
  EXPECT_EQ(p.answer->point, 572);
  EXPECT_THAT(p.reason, HasSubstr("knee between 572 and 584"));
}

TEST(KneeSearch, TheFirstRoundLeavesHalfOfMaxTrials) {
  // Eight node_slots but max_trials 10: a first round of five (narrow, 4% apart),
  // the other five for a knee outside it.
  KneeSearch search;
  SearchSpace s = Reference();
  s.max_points = 10;
  SearchDecision d = search.Decide(s, {}, 8);
  EXPECT_THAT(d.wanted, ElementsAre(559, 584, 608, 632, 657));
}

TEST(KneeSearch, ANeighbourSlotsNoiseWidensTheBandOnceARunHadOne) {
  // On throughput alone, 6% below the best is a fall with the runs' own
  // noise; with 5% of neighbour noise and a run measured beside a busy
  // slot, it is not; without such a run the neighbour noise adds nothing.
  SearchSpace s = Reference();
  s.neighbour_noise = 0.05;
  Outcomes finished;
  for (auto [b, v] : {std::pair{500, 1000.0}, std::pair{560, 940.0}}) {
    PointOutcome o = Measured(v, std::nullopt);
    o.samples = {v, v};
    o.runs = 2;
    finished[b] = o;
  }
  EXPECT_EQ(knee::Read(s, finished).side.at(560), knee::Side::kPast);
  finished[560].beside_neighbours = 1;
  EXPECT_EQ(knee::Read(s, finished).side.at(560), knee::Side::kBelow);
  s.neighbour_noise = 0;
  EXPECT_EQ(knee::Read(s, finished).side.at(560), knee::Side::kPast);
}

TEST(KneeSearch, StopsAtMaxTrials) {
  KneeSearch search;
  SearchSpace s = Reference();
  s.max_points = 3;
  Played p = Play(search, s, [](int64_t b, size_t) { return WithSignal(b); });
  EXPECT_EQ(p.runs.size(), 3u);
  EXPECT_THAT(p.reason, HasSubstr("max_trials (3) reached"));
}

TEST(GridSearch, MeasuresEveryPointAndTakesTheBest) {
  GridSearch search;
  SearchSpace s = Reference();
  EXPECT_THAT(GridPoints(s), ElementsAre(362, 400, 500, 600, 700, 800, 900, 1000, 1088));
  Played p = Play(
      search, s, [](int64_t b, size_t) { return WithSignal(b); }, 4);
  EXPECT_EQ(p.runs.size(), 9u);
  EXPECT_EQ(p.rounds, 3u);
  ASSERT_TRUE(p.answer.has_value());
  EXPECT_EQ(p.answer->point, 500);
  EXPECT_EQ(search.PlannedPoints(s), 9u);
}

// The answer says what it rests on: the knee (or its cost fit) with the
// counter, throughput alone without it, the ladder for the practice.
TEST(KneeSearch, TheAnswerNamesItsBasis) {
  KneeSearch knee;
  Played with = Play(knee, Reference(), [](int64_t b, size_t) { return WithSignal(b); });
  ASSERT_TRUE(with.answer.has_value());
  EXPECT_THAT(with.answer->basis, ::testing::AnyOf("knee", "knee-fit"));
  EXPECT_THAT(with.answer->basis_reason, HasSubstr("knee (between"));
  Played without = Play(knee, Reference(), [](int64_t b, size_t) { return NoSignal(b); });
  ASSERT_TRUE(without.answer.has_value());
  EXPECT_EQ(without.answer->basis, "measured");
  EXPECT_THAT(without.answer->basis_reason, HasSubstr("publishes no preemption counter"));
  PracticeSearch practice;
  Played ladder = Play(practice, Reference(), [](int64_t b, size_t) { return WithSignal(b); });
  ASSERT_TRUE(ladder.answer.has_value());
  EXPECT_EQ(ladder.answer->basis, "practice-ladder");
}

// A host-side cost that grows with the batch: throughput peaks at 470 and
// falls 1% per 20 sequences with no preemption, below the KV knee at 575.
// The knee model cannot explain a fall below the knee: the search brackets
// throughput's peak instead, and says so.
TEST(KneeSearch, APeakBelowTheKneeRestsOnMeasurements) {
  auto curve = [](int64_t b) {
    const double host = b <= 470 ? 1 : 1 - 0.01 * static_cast<double>(b - 470) / 20;
    return Measured(Curve(std::min<int64_t>(b, 470)) * host * (Curve(b) / Rising(b)),
                    Preemptions(b));
  };
  KneeSearch search;
  Played p = Play(search, Reference(), [&](int64_t b, size_t) { return curve(b); });
  ASSERT_TRUE(p.answer.has_value());
  EXPECT_EQ(p.answer->basis, "measured");
  EXPECT_THAT(p.answer->basis_reason, HasSubstr("throughput falls below the knee"));
  EXPECT_THAT(p.reason, HasSubstr("the knee model does not hold"));
  EXPECT_GE(curve(p.answer->point).objective, 0.99 * curve(470).objective) << p.answer->point;
  EXPECT_LE(p.runs.size(), 12u);
}

// MindIE swapping instead of recomputing: the counter it publishes stays at
// 0 while throughput falls past the knee.
TEST(KneeSearch, ASilentCounterIsNoticed) {
  auto curve = [](int64_t b) { return Measured(Curve(b), 0); };
  KneeSearch search;
  Played p = Play(search, Reference(), [&](int64_t b, size_t) { return curve(b); });
  ASSERT_TRUE(p.answer.has_value());
  EXPECT_EQ(p.answer->basis, "measured");
  EXPECT_THAT(p.answer->basis_reason, HasSubstr("counter stays at 0 while throughput falls"));
  EXPECT_GE(Curve(p.answer->point), 0.99 * Curve(kKnee)) << p.answer->point;
}

// A fall below the knee breaks the model at once beyond kBreakZ standard
// errors; within reach of the noise it is settled by repeats first.
TEST(KneeModelCheck, AFallWithinTheNoiseIsSettledBeforeItBreaksTheModel) {
  auto check = [](const Outcomes& o) {
    return knee::CheckKneeModel(Reference(), o, knee::Read(Reference(), o));
  };
  Outcomes o;
  o[500] = Measured(1000, 0);
  o[520] = Measured(1000 * (1 - 0.03), 0);  // inside 2 x 2% x sqrt(2) = 5.7%
  EXPECT_FALSE(check(o).broken.has_value());
  EXPECT_TRUE(check(o).settle.empty());
  o[520] = Measured(1000 * (1 - 0.07), 0);  // beyond 5.7%, inside 3 x 2.8% = 8.5%
  EXPECT_FALSE(check(o).broken.has_value());
  EXPECT_THAT(check(o).settle, ElementsAre(500, 520));
  o[500].samples = {1000, 1000};
  o[520].samples = {930, 930};
  o[520].objective = 930;
  auto settled = check(o);
  ASSERT_TRUE(settled.broken.has_value());
  EXPECT_THAT(*settled.broken, HasSubstr("at 520, 7.0% under 1000 at 500"));
  EXPECT_THAT(*settled.broken, HasSubstr("counter stays at 0"));
  o.erase(520);
  o[540] = Measured(1000 * (1 - 0.10), 0);  // beyond 8.5%: at once
  EXPECT_TRUE(check(o).broken.has_value());
  // Without a counter there is no knee model to break.
  Outcomes quiet;
  quiet[500] = Measured(1000, std::nullopt);
  quiet[540] = Measured(800, std::nullopt);
  EXPECT_FALSE(check(quiet).broken.has_value());
}

// The evidence of a fall does not go away when another point reads higher:
// a fall settled between 500 and 560 (5% on two runs each, beyond the 4%
// band) still breaks the model once 530, measured once, reads above both,
// although 560 against 530 alone would want settling first.
TEST(KneeModelCheck, ASettledFallStaysAFallWhenAThirdPointReadsHigher) {
  auto check = [](const Outcomes& o) {
    return knee::CheckKneeModel(Reference(), o, knee::Read(Reference(), o));
  };
  Outcomes o;
  o[500] = Measured(1000, 0);
  o[500].samples = {1000, 1000};
  o[560] = Measured(950, 0);
  o[560].samples = {950, 950};
  ASSERT_TRUE(check(o).broken.has_value());
  o[530] = Measured(1010, 0);
  auto with_third = check(o);
  ASSERT_TRUE(with_third.broken.has_value());
  EXPECT_THAT(*with_third.broken, HasSubstr("at 560, 5.0% under 1000 at 500"));
}

// Points measured once each, without a preemption counter.
Outcomes Unsignalled(const std::vector<std::pair<int64_t, double>>& points) {
  Outcomes o;
  for (const auto& [b, v] : points) o[b] = Measured(v, std::nullopt);
  return o;
}

// One point measured once per sample, without a counter: its mean, its runs.
PointOutcome Repeated(const std::vector<double>& samples) {
  double sum = 0;
  for (double v : samples) sum += v;
  PointOutcome o = Measured(sum / static_cast<double>(samples.size()), std::nullopt);
  o.samples = samples;
  o.runs = samples.size();
  return o;
}

// On throughput alone the answer is smoothed by a quadratic over the best
// mean's level neighbours; a fit that is not concave has no top, and would
// rank an end of its window first. The best mean answers instead (the
// zoo's trtllm-llama33-70b-4xh100, where the fit took 1024 for a peak at 512).
TEST(KneeSearch, AConvexSmoothingFitLeavesTheBestMean) {
  const SearchSpace space = Space(64, 2048, 64, 0);
  Outcomes o = Unsignalled({{64, 2005},
                            {128, 2048},
                            {256, 2118},
                            {576, 2406},
                            {608, 2329},
                            {768, 2338},
                            {1024, 2427},
                            {2048, 2019}});
  o[512] = Repeated({2458, 2389});
  o[640] = Repeated({2479, 2378});
  auto best = KneeSearch().Best(space, o);
  ASSERT_TRUE(best.has_value());
  EXPECT_EQ(best->basis, "measured");
  EXPECT_EQ(best->point, 640);
}

// A curve still rising at the range's top: two points at the top the noise
// cannot rank, above a clearly lower one. The larger is the answer, whichever
// mean the noise put first.
TEST(KneeSearch, LevelPointsAtTheTopOfARiseTakeTheLargest) {
  const SearchSpace space = Space(1, 64, 1, 0);
  Outcomes o = Unsignalled({{28, 2005}, {46, 3126}, {55, 3481}, {60, 3891}});
  o[62] = Repeated({4229, 4135});
  o[64] = Repeated({4170, 4170});
  KneeSearch search;
  auto best = search.Best(space, o);
  ASSERT_TRUE(best.has_value());
  EXPECT_EQ(best->point, 64);
  EXPECT_EQ(best->basis, "measured");
  // Below the range's top the best mean stays the answer.
  auto lower = search.Best(Space(1, 80, 1, 0), o);
  ASSERT_TRUE(lower.has_value());
  EXPECT_EQ(lower->point, 62);
}

std::vector<int64_t> OnePeakProbe(const Outcomes& o, std::string* why = nullptr) {
  std::string ignored;
  return knee::PeakProbes(Reference(), o, knee::Read(Reference(), o), 1, why ? why : &ignored);
}

// One node on throughput alone: a neighbour far under the best (a cliff:
// something ran out) sends the next run toward the cliff's edge, although
// the other side of the bracket is wider.
TEST(KneeProbes, OneRunGoesTowardACliffFirst) {
  EXPECT_THAT(OnePeakProbe(Unsignalled({{400, 950}, {600, 1000}, {700, 600}})), ElementsAre(650));
}

// A gentle slope on both sides: the run goes to the side of the higher
// neighbour, where the peak more likely lies, whichever side is wider.
TEST(KneeProbes, OneRunGoesTowardTheHigherNeighbour) {
  EXPECT_THAT(OnePeakProbe(Unsignalled({{400, 950}, {600, 1000}, {700, 970}})), ElementsAre(650));
  EXPECT_THAT(OnePeakProbe(Unsignalled({{400, 980}, {600, 1000}, {700, 970}})), ElementsAre(500));
}

// A narrow bracket around the best is the peak's only if its sides fall:
// when every point on one side reads level with the best (the noise cannot
// tell them apart), the top may go on past them, and one run steps past
// that side's far end first (the zoo's dip-partial-recovery, where a lucky
// run put the best 4% under the peak).
TEST(KneeProbes, ANarrowBracketStepsPastASideThatStaysLevel) {
  Outcomes o = Unsignalled({{550, 1853}, {562, 1839}, {573, 1861}, {585, 1840}, {596, 1700}});
  // 573 x kSpread = 23 below the left side's far end.
  EXPECT_THAT(OnePeakProbe(o), ElementsAre(527));
  // Both sides fall: the bracket stands.
  o[550] = Measured(1700, std::nullopt);
  std::string why;
  EXPECT_THAT(OnePeakProbe(o, &why), testing::IsEmpty());
  EXPECT_THAT(why, HasSubstr("throughput peaks at 573 between 562 and 585"));
}

// A check point below the knee that the points near the knee do not clearly
// beat (a host-side cost can put the peak there) is settled by repeats; one
// they beat beyond two standard errors is the model holding.
TEST(KneeModelCheck, ACheckPointNotClearlyUnderTheKneeIsSettled) {
  Outcomes o;
  for (int64_t b : {435, 500, 560, 575}) o[b] = WithSignal(b);
  const auto at = knee::CheckPoint(Reference(), knee::Read(Reference(), o));
  ASSERT_TRUE(at.has_value());
  auto check = [&] { return knee::CheckKneeModel(Reference(), o, knee::Read(Reference(), o)); };
  o[*at] = Measured(WithSignal(575).objective * 0.99, 0);
  EXPECT_THAT(check().settle, testing::Contains(*at));
  o[*at] = Measured(WithSignal(575).objective * 0.90, 0);
  EXPECT_TRUE(check().settle.empty());
}

// A knee far above the block-count guess leaves the stretch from the
// practice's start up to it long: the model is checked a second time,
// halfway between the start and the guess, where the search expected the
// knee. A knee near the guess keeps the one check point.
TEST(KneeModelCheck, AKneeFarAboveTheGuessIsCheckedBetweenTheStartAndTheGuess) {
  const SearchSpace s = Reference();  // start 435, guess 608
  Outcomes near;
  near[560] = Measured(1000, 0);
  near[640] = Measured(900, 40);
  EXPECT_FALSE(knee::FarAboveGuess(s, knee::Read(s, near)));
  EXPECT_THAT(knee::CheckPoints(s, knee::Read(s, near)), ElementsAre(435));
  Outcomes far;
  far[608] = Measured(1000, 0);
  far[800] = Measured(1010, 0);  // 800 > 1.25 x 608
  far[1000] = Measured(700, 300);
  EXPECT_TRUE(knee::FarAboveGuess(s, knee::Read(s, far)));
  EXPECT_THAT(knee::CheckPoints(s, knee::Read(s, far)), ElementsAre(435, (435 + 608) / 2));
  // Without a counter there is no knee to be far.
  Outcomes blind;
  for (const auto& [b, o] : far) blind[b] = Measured(o.objective, std::nullopt);
  EXPECT_FALSE(knee::FarAboveGuess(s, knee::Read(s, blind)));
}

// Not unimodal, with the KV knee far above the guess (the zoo's
// dip-partial-recovery): throughput peaks at 520, dips 8% around 640,
// recovers to 97% of the peak at 800 and falls past the knee at 850. The
// check at the practice's start (435) cannot see the peak; the second
// check point (521) can, the model breaks, and the answer rests on the
// measurements, within the 12-run ceiling.
TEST(KneeSearch, APeakHiddenBelowAFarKneeIsFoundByTheSecondCheckPoint) {
  auto speed = [](int64_t b) {
    const auto x = static_cast<double>(b);
    if (b <= 520) return 1900 - 0.9 * (520 - x);
    if (b <= 640) return 1900 - 1.2 * (x - 520);
    if (b <= 850) return 1756 + 0.55 * (std::min(x, 800.0) - 640);
    return 1844 - 2 * (x - 850);
  };
  auto measure = [&](int64_t b, size_t) {
    return Measured(speed(b), b <= 850 ? 0 : 3 * (b - 850));
  };
  KneeSearch search;
  Played p = Play(search, Reference(), measure);
  EXPECT_THAT(p.runs, testing::Contains((435 + 608) / 2));
  EXPECT_LE(p.runs.size(), 12u);
  ASSERT_TRUE(p.answer.has_value());
  EXPECT_EQ(p.answer->basis, "measured");
  EXPECT_GE(speed(p.answer->point), 0.99 * speed(520)) << p.answer->point;
}

// Once the knee's lower end lies far above the guess, the check points
// are measured before the knee is bracketed: the stretch below is long and
// the model in doubt, so a peak there is looked for before more runs go
// further up.
TEST(KneeSearch, AFarKneeIsCheckedBeforeItIsBracketed) {
  KneeSearch search;
  const SearchSpace s = Reference();  // start 435, guess 608
  Outcomes o;
  for (int64_t b : {608, 632, 657, 706, 800}) o[b] = Measured(1000 + 0.1 * b, 0);
  ASSERT_TRUE(knee::FarAboveGuess(s, knee::Read(s, o)));
  SearchDecision d = search.Decide(s, o, 1);
  ASSERT_FALSE(d.done) << d.reason;
  EXPECT_THAT(d.wanted, ElementsAre(435));
  o[435] = Measured(1000, 0);
  d = search.Decide(s, o, 1);
  ASSERT_FALSE(d.done) << d.reason;
  EXPECT_THAT(d.wanted, ElementsAre((435 + 608) / 2));
}

// A knee far above the guess whose check point reads as high as the points
// near the knee, with no run left to settle the two: the model is in doubt,
// and the answer rests on the best mean instead of the knee rule's largest
// point in the band.
TEST(KneeSearch, AnUnsettledCheckAsHighAsAFarKneeLeavesTheAnswerToTheMeasurements) {
  KneeSearch search;
  const SearchSpace s = Reference();
  Outcomes o;
  for (int64_t b : {608, 632, 657, 706}) o[b] = Measured(1820, 0);
  o[800] = Measured(1830, 0);
  o[900] = Measured(1100, 300);
  o[435] = Measured(1760, 0);
  o[521] = Measured(1850, 0);
  o[521].samples = {1850, 1850};
  const auto check = knee::CheckKneeModel(s, o, knee::Read(s, o));
  ASSERT_FALSE(check.broken.has_value());
  EXPECT_TRUE(check.doubted);
  std::optional<SearchAnswer> best = search.Best(s, o);
  ASSERT_TRUE(best.has_value());
  EXPECT_EQ(best->point, 521);
  EXPECT_EQ(best->basis, "measured");
  EXPECT_THAT(best->basis_reason, HasSubstr("far above the guess"));
  // The check clearly under the knee: the model holds, the knee rule answers.
  o[521] = Measured(1700, 0);
  o[521].samples = {1700, 1700};
  best = search.Best(s, o);
  ASSERT_TRUE(best.has_value());
  EXPECT_EQ(best->point, 800);
}

TEST(GridSearch, InfeasiblePointCapsTheGrid) {
  GridSearch search;
  Played p = Play(search, Reference(), [](int64_t b, size_t) {
    return b >= 700 ? NotOk(Kind::kInfeasible, "oom") : WithSignal(b);
  });
  EXPECT_THAT(p.runs, ElementsAre(362, 400, 500, 600, 700));
  EXPECT_THAT(p.reason, HasSubstr("every grid point below 700 (oom) measured"));
}

TEST(SearchNoise, PooledRelativeNoiseAndBand) {
  Outcomes o;
  o[500] = Measured(100, 0);
  o[500].samples = {98, 102};
  o[600] = Measured(200, 0);
  o[600].samples = {196, 204};
  EXPECT_NEAR(MeasuredNoise(o).value(), 0.02 * std::sqrt(2.0), 1e-12);
  EXPECT_FALSE(MeasuredNoise({{500, Measured(1, 0)}}).has_value());
  EXPECT_NEAR(NoiseBand(0.02, 1, 1), 2 * 0.02 * std::sqrt(2.0), 1e-12);
}

}  // namespace
}  // namespace crest::controller
