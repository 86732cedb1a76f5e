// The HTML report in a real browser (Debian `chromium`, headless): the
// screenshot is not blank, the SVG holds one point per ok trial, and at a
// phone's width the page does not scroll sideways. Browser facts are read
// back with --dump-dom from a copy of the page with a probe script appended
// (the report itself carries no script).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <regex>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"

#include "common/file_util.h"
#include "controller/campaign_io/report_html.h"
#include "controller/campaign_io/testing/sample_report.h"
#include "tests/observability/stack.h"

namespace crest::observability {
namespace {

class ReportInChromium : public ::testing::Test {
 protected:
  void SetUp() override {
    chromium_ = FindOnPath("chromium");
    if (chromium_.empty()) {
      GTEST_SKIP() << "chromium not installed: apt-get install chromium "
                      "(listed in scripts/debian-packages.txt)";
    }
    e2e::BecomeSubreaper();
    crest::v1::Campaign campaign = controller::testing::SampleCampaign();
    controller::HtmlReportInput in;
    in.report = controller::testing::SampleReport();
    in.campaign = &campaign;
    in.practice_max_batch_size = {{"LLaMa3-8B", 435}};
    html_ = controller::ReportToHtml(in);
    report_ = dir_.File("report.html");
    ASSERT_TRUE(WriteFileAtomically(report_, html_).ok());
  }

  void TearDown() override { e2e::KillAllChildren(); }

  // Runs headless chromium on `file` at `width` x `height` with `mode`
  // (--screenshot=PATH or --dump-dom); returns its output.
  e2e::CommandResult Chromium(const std::string& file, int width, int height,
                              const std::string& mode) {
    return e2e::RunBinary(
        chromium_,
        {"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--hide-scrollbars",
         absl::StrCat("--user-data-dir=", dir_.File(absl::StrCat("profile", ++runs_))),
         absl::StrCat("--window-size=", width, ",", height), "--virtual-time-budget=5000", mode,
         "file://" + file},
        absl::Seconds(40));
  }

  // The value of data-NAME="..." in a dumped DOM, or -1.
  static double DataAttribute(const std::string& dom, const std::string& name) {
    std::smatch m;
    double v = -1;
    if (std::regex_search(dom, m, std::regex(absl::StrCat("data-", name, "=\"([-0-9.e]+)\""))) &&
        absl::SimpleAtod(m[1].str(), &v)) {
      return v;
    }
    return -1;
  }

  // The report with `probe` (JavaScript writing data-* attributes on <body>) appended.
  std::string Probed(const std::string& name, const std::string& probe) {
    std::string file = dir_.File(name);
    std::string text = absl::StrReplaceAll(
        html_, {{"</body>", absl::StrCat("<script>", probe, "</script></body>")}});
    EXPECT_TRUE(WriteFileAtomically(file, text).ok());
    return file;
  }

  std::string chromium_;
  crest::testing::TempDir dir_;
  std::string html_;
  std::string report_;
  int runs_ = 0;
};

TEST_F(ReportInChromium, ScreenshotIsNotBlank) {
  const std::string shot = dir_.File("report.png");
  e2e::CommandResult r = Chromium(report_, 1280, 1600, "--screenshot=" + shot);
  ASSERT_EQ(r.code, 0) << r.output;
  auto png = ReadFileToString(shot);
  ASSERT_TRUE(png.ok()) << png.status() << "\n" << r.output;
  ASSERT_EQ(png->substr(0, 8), "\x89PNG\r\n\x1a\n");
  // Count the screenshot's pixels in the browser itself: a data: URL image
  // does not taint the canvas, so its pixels can be read back.
  const std::string checker = dir_.File("check.html");
  ASSERT_TRUE(
      WriteFileAtomically(
          checker,
          absl::StrCat("<!DOCTYPE html><body><img id=i src=\"data:image/png;base64,",
                       absl::Base64Escape(*png), "\"><script>",
                       "window.onload=function(){var i=document.getElementById('i');",
                       "var c=document.createElement('canvas');c.width=i.naturalWidth;",
                       "c.height=i.naturalHeight;var x=c.getContext('2d');x.drawImage(i,0,0);",
                       "var d=x.getImageData(0,0,c.width,c.height).data,n=0,colors={};",
                       "for(var k=0;k<d.length;k+=4){if(d[k]<240||d[k+1]<240||d[k+2]<240)n++;",
                       "colors[(d[k]>>4)+','+(d[k+1]>>4)+','+(d[k+2]>>4)]=1;}",
                       "document.body.setAttribute('data-width',c.width);",
                       "document.body.setAttribute('data-nonwhite',n/(d.length/4));",
                       "document.body.setAttribute('data-colors',Object.keys(colors).length);};",
                       "</script></body>"))
          .ok());
  e2e::CommandResult dom = Chromium(checker, 800, 600, "--dump-dom");
  ASSERT_EQ(dom.code, 0) << dom.output;
  EXPECT_EQ(DataAttribute(dom.output, "width"), 1280) << dom.output.substr(0, 500);
  // Text, table rules, two curves: well over 2% of the page is not white,
  // in more than a handful of colours.
  EXPECT_GT(DataAttribute(dom.output, "nonwhite"), 0.02);
  EXPECT_GT(DataAttribute(dom.output, "colors"), 8);
}

TEST_F(ReportInChromium, OnePointPerOkTrialAndNoSidewaysScrollOnAPhone) {
  const std::string probe =
      "var b=document.body,e=document.documentElement;"
      "b.setAttribute('data-points',document.querySelectorAll('svg circle.pt').length);"
      "b.setAttribute('data-svgs',document.querySelectorAll('svg').length);"
      "b.setAttribute('data-scroll',e.scrollWidth);"
      "b.setAttribute('data-viewport',e.clientWidth);"
      "b.setAttribute('data-svgwidth',document.querySelector('svg').getBoundingClientRect().width)"
      ";";
  const std::string file = Probed("probed.html", probe);
  for (int width : {1280, 375}) {
    e2e::CommandResult dom = Chromium(file, width, 800, "--dump-dom");
    ASSERT_EQ(dom.code, 0) << dom.output;
    EXPECT_EQ(DataAttribute(dom.output, "points"), controller::testing::SampleOkTrials()) << width;
    EXPECT_EQ(DataAttribute(dom.output, "svgs"), 2) << width;
    const double viewport = DataAttribute(dom.output, "viewport");
    EXPECT_GT(viewport, 300) << width;
    EXPECT_LE(DataAttribute(dom.output, "scroll"), viewport)
        << "the page scrolls sideways at width " << width;
    // The curve shrinks to the screen rather than overflowing it.
    EXPECT_LE(DataAttribute(dom.output, "svgwidth"), viewport) << width;
  }
}

}  // namespace
}  // namespace crest::observability
