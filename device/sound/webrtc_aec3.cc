// WebRTC's audio processing (AEC3 and its high-pass filter) with the length of AEC3's linear filter
// set, behind a C API that device/sound/echo_canceller.py loads with ctypes.
//
// Why a binding of our own: the wrappers with wheels (livekit 1.2.1, pywebrtc-audio 0.2.0) take a few
// booleans and build AEC3 with its default EchoCanceller3Config, whose linear filter covers 13 blocks
// of 4 ms (52 ms). A kiosk's speaker sits centimetres from its microphone in a reverberant hall: the
// echo's tail past 52 ms stays for the residual echo suppressor, which then also silences a visitor
// talking over the reply (docs/lab/bargein.md, "AEC3's linear filter and the hall's tail"). The library is
// WebRTC's own code, built from the webrtc-audio-processing 2.1 sources (setup.py); only this file is ours.
// EchoCanceller3 is constructed through AudioProcessingBuilder::SetEchoControlFactory, as in
// webrtc/api/audio/audio_processing.h and modules/audio_processing/audio_processing_impl.cc
// (InitializeEchoController), with the same arguments the module gives its own.

#include <cstdint>
#include <memory>
#include <optional>

#include "api/audio/audio_processing.h"
#include "api/audio/echo_canceller3_config.h"
#include "api/audio/echo_control.h"
#include "modules/audio_processing/aec3/echo_canceller3.h"

namespace {

constexpr int kRate = 16000;  // mono 10 ms blocks of 160 int16 samples

class Aec3Factory : public webrtc::EchoControlFactory {
 public:
  explicit Aec3Factory(const webrtc::EchoCanceller3Config& config) : config_(config) {}
  std::unique_ptr<webrtc::EchoControl> Create(int rate, int render_channels, int capture_channels) override {
    return std::make_unique<webrtc::EchoCanceller3>(config_, std::nullopt, rate, render_channels, capture_channels);
  }

 private:
  webrtc::EchoCanceller3Config config_;
};

struct Canceller {
  rtc::scoped_refptr<webrtc::AudioProcessing> apm;
  webrtc::StreamConfig stream{kRate, 1};
};

}  // namespace

extern "C" {

// A canceller whose linear filter covers `filter_blocks` blocks of 4 ms (13: WebRTC's default, 52 ms,
// up to 125: 500 ms); nullptr outside that or if the config is invalid (AEC3 aborts on a 1-block filter).
void* aec3_create(int filter_blocks) {
  if (filter_blocks < 13 || filter_blocks > 125) return nullptr;
  webrtc::EchoCanceller3Config config;
  auto& filter = config.filter;
  filter.refined.length_blocks = filter.coarse.length_blocks = filter_blocks;  // the initial 2.5 s keep 12 blocks
  if (!webrtc::EchoCanceller3Config::Validate(&config)) return nullptr;
  webrtc::AudioProcessing::Config settings;
  settings.echo_canceller.enabled = true;
  settings.high_pass_filter.enabled = true;
  auto* canceller = new Canceller;
  canceller->apm = webrtc::AudioProcessingBuilder()
                       .SetConfig(settings)
                       .SetEchoControlFactory(std::make_unique<Aec3Factory>(config))
                       .Create();
  return canceller;
}

// The far end: 160 samples the speaker played. 0 on success (AudioProcessing's error codes otherwise).
int aec3_far_end(void* handle, const int16_t* block) {
  auto* canceller = static_cast<Canceller*>(handle);
  int16_t unused[kRate / 100];
  return canceller->apm->ProcessReverseStream(block, canceller->stream, canceller->stream, unused);
}

// The near end: 160 microphone samples in, the same with the echo removed out.
int aec3_near_end(void* handle, const int16_t* block, int16_t* cleaned) {
  auto* canceller = static_cast<Canceller*>(handle);
  canceller->apm->set_stream_delay_ms(0);  // wanted with every capture block; AEC3 finds the delay itself
  return canceller->apm->ProcessStream(block, canceller->stream, canceller->stream, cleaned);
}

void aec3_destroy(void* handle) { delete static_cast<Canceller*>(handle); }

}  // extern "C"
