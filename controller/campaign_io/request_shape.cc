#include "controller/campaign_io/request_shape.h"

#include <algorithm>

namespace crest::controller {

RequestShape RequestShapeFor(const crest::v1::ClientSpec& client) {
  RequestShape shape;
  shape.max_output_tokens = client.max_output_len();
  switch (client.dataset().type()) {
    case crest::v1::DATASET_TYPE_SYNTHETIC:
      shape.avg_input_tokens = client.dataset().synthetic_input_tokens();
      shape.avg_output_tokens = shape.max_output_tokens;
      break;
    default:  // GSM8K (and unknown JSONL until measured): the reference figures.
      shape.avg_input_tokens = 186;
      shape.avg_output_tokens = 346;
      break;
  }
  if (client.avg_input_tokens() > 0) shape.avg_input_tokens = client.avg_input_tokens();
  if (client.avg_output_tokens() > 0) shape.avg_output_tokens = client.avg_output_tokens();
  shape.avg_output_tokens = std::min(shape.avg_output_tokens, shape.max_output_tokens);
  return shape;
}

}  // namespace crest::controller
