// Markup DeepSeek V4 uses around tool calls ("DSML", DeepSeek markup) and
// the special-token texts its chat template writes. Shared by the renderer
// (chat/deepseek4.cpp) and the parser of model output (chat/dsml_parse.h).
#pragma once

#include <string_view>

namespace ds4 {

// "｜DSML｜" with full-width vertical bars, as in the template.
inline constexpr std::string_view kDsmlToken = "\xEF\xBD\x9C" "DSML" "\xEF\xBD\x9C";
// "<｜end▁of▁sentence｜>": closes every assistant turn.
inline constexpr std::string_view kEndOfSentence =
    "<\xEF\xBD\x9C" "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>";

}  // namespace ds4
