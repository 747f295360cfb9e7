// Hand-checked cases read off the Qwen3 template; the byte-for-byte proof
// against the real template is tests/oracle/chat_qwen3_test.cpp.
#include <gtest/gtest.h>

#include "chat/chat.h"
#include "common/error.h"

using ds4::ChatMessage;
using ds4::ChatOptions;

TEST(ChatQwen3, SingleUserTurnOpensAnAssistantTurn) {
    EXPECT_EQ(ds4::render_qwen3({{"user", "hi", {}}}, ChatOptions{}),
              "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n");
}

TEST(ChatQwen3, NoThinkPrefillsAnEmptyThinkBlock) {
    EXPECT_EQ(ds4::render_qwen3({{"system", "S", {}}, {"user", "hi", {}}}, ChatOptions{true, false}),
              "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n"
              "<|im_start|>assistant\n<think>\n\n</think>\n\n");
}

TEST(ChatQwen3, EarlierAssistantTurnsLoseTheirReasoning) {
    std::vector<ChatMessage> chat = {{"user", "q1", {}},
                                     {"assistant", "<think>\nr1\n</think>\n\na1", {}},
                                     {"assistant", "a2", std::string("r2")},
                                     {"user", "q2", {}}};
    EXPECT_EQ(ds4::render_qwen3(chat, ChatOptions{false, true}),
              "<|im_start|>user\nq1<|im_end|>\n<|im_start|>assistant\na1<|im_end|>\n"
              "<|im_start|>assistant\na2<|im_end|>\n<|im_start|>user\nq2<|im_end|>\n");
}

TEST(ChatQwen3, TheFinalAssistantTurnKeepsItsReasoning) {
    std::vector<ChatMessage> chat = {{"user", "q", {}}, {"assistant", "\n\nanswer", std::string("\nwhy\n\n")}};
    EXPECT_EQ(ds4::render_qwen3(chat, ChatOptions{false, true}),
              "<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\n<think>\nwhy\n</think>\n\nanswer<|im_end|>\n");
    // The last assistant turn gets a think block even with no reasoning.
    chat[1] = {"assistant", "plain", {}};
    EXPECT_EQ(ds4::render_qwen3(chat, ChatOptions{false, true}),
              "<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\nplain<|im_end|>\n");
}

TEST(ChatQwen3, ConsecutiveToolResultsShareOneUserTurn) {
    std::vector<ChatMessage> chat = {{"user", "q", {}}, {"assistant", "", {}}, {"tool", "A", {}}, {"tool", "B", {}}};
    EXPECT_EQ(ds4::render_qwen3(chat, ChatOptions{true, true}),
              // not the last message and no reasoning: no think block
              "<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\n<|im_end|>\n"
              "<|im_start|>user\n<tool_response>\nA\n</tool_response>\n<tool_response>\nB\n</tool_response><|im_end|>\n"
              "<|im_start|>assistant\n");
}

TEST(ChatQwen3, The2507TemplatesOpenTheAssistantTurnTheirOwnWay) {
    const std::vector<ChatMessage> chat = {{"user", "hi", {}}};
    const std::string head = "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n";
    for (bool thinking : {true, false}) {
        const ChatOptions options{true, thinking};
        // Instruct-2507 has no thinking switch; Thinking-2507 always thinks.
        EXPECT_EQ(ds4::render_qwen3(chat, options, ds4::Qwen3Variant::instruct_2507), head);
        EXPECT_EQ(ds4::render_qwen3(chat, options, ds4::Qwen3Variant::thinking_2507), head + "<think>\n");
        EXPECT_EQ(ds4::render_chat("qwen3-instruct-2507", chat, options), head);
        EXPECT_EQ(ds4::render_chat("qwen3-thinking-2507", chat, options), head + "<think>\n");
    }
    // Without a generation prompt the variants render the same history.
    const std::vector<ChatMessage> history = {{"user", "q", {}}, {"assistant", "a", std::string("r")}};
    const ChatOptions closed{false, true};
    EXPECT_EQ(ds4::render_qwen3(history, closed, ds4::Qwen3Variant::instruct_2507), ds4::render_qwen3(history, closed));
    EXPECT_EQ(ds4::render_qwen3(history, closed, ds4::Qwen3Variant::thinking_2507), ds4::render_qwen3(history, closed));
}

TEST(ChatQwen3, BadConversationsAreErrors) {
    EXPECT_THROW(ds4::render_qwen3({}, ChatOptions{}), ds4::Error);
    EXPECT_THROW(ds4::render_qwen3({{"user", "x", {}}, {"narrator", "y", {}}}, ChatOptions{}), ds4::Error);
}

TEST(ChatTemplate, DispatchesByNameAndRejectsUnknownNames) {
    std::vector<ChatMessage> chat = {{"user", "hi", {}}};
    EXPECT_EQ(ds4::render_chat("qwen3", chat, ChatOptions{}), ds4::render_qwen3(chat, ChatOptions{}));
    try {
        ds4::render_chat("llama3", chat, ChatOptions{});
        ADD_FAILURE() << "unknown template accepted";
    } catch (const ds4::Error& e) {
        EXPECT_NE(std::string(e.what()).find("llama3"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("qwen3"), std::string::npos) << e.what();
    }
}

TEST(ChatTemplate, EveryListedNameRendersAndRawIsTheBareText) {
    std::vector<ChatMessage> chat = {{"system", "S", {}}, {"user", "hi", {}}};
    ASSERT_EQ(ds4::chat_template_names().size(), 7u);
    for (const std::string& name : ds4::chat_template_names()) {
        EXPECT_FALSE(ds4::render_chat(name, chat, ChatOptions{}).empty()) << name;
        EXPECT_NE(ds4::chat_template_list().find(name), std::string::npos) << name;
    }
    EXPECT_EQ(ds4::render_chat(ds4::kRawChat, chat, ChatOptions{}), "Shi");
    EXPECT_EQ(ds4::render_raw({{"user", "<|im_start|> as is\n", {}}}), "<|im_start|> as is\n");
}

TEST(ChatTemplate, PlainChatmlIsNotMistakenForQwen3) {
    EXPECT_EQ(ds4::detect_chat_template(""), "");
    EXPECT_EQ(ds4::detect_chat_template("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + "
                                        "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}"),
              "");
}
