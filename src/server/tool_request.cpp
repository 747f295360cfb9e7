#include "server/tool_request.h"

#include "server/json_fields.h"

namespace ds4 {

namespace {

using ojson = nlohmann::ordered_json;

bool present(const ojson& j, const char* key) { return j.contains(key) && !j[key].is_null(); }

std::string name_of(const ojson& holder, const std::string& where) {
    if (!holder.contains("name") || !holder["name"].is_string() || holder["name"].get<std::string>().empty())
        bad_field(where + ".name", "'" + where + ".name' must be a non-empty string.");
    return holder["name"].get<std::string>();
}

void check_unique(const std::vector<std::string>& names, const std::string& field) {
    for (size_t i = 0; i < names.size(); ++i)
        for (size_t k = 0; k < i; ++k)
            if (names[i] == names[k])
                bad_field(field, "'" + field + "' offers the function \"" + names[i] + "\" twice.");
}

void check_choice_name(const RequestTools& t, const std::string& field) {
    for (const std::string& n : t.names)
        if (n == t.choice.name) return;
    bad_field(field, "'" + field + "' names the function \"" + t.choice.name + "\", which 'tools' does not offer.");
}

}  // namespace

RequestTools parse_openai_tools(const ojson& body) {
    RequestTools t;
    if (present(body, "tools")) {
        const ojson& tools = body["tools"];
        if (!tools.is_array()) bad_field("tools", "'tools' must be an array of {\"type\": \"function\", \"function\": {...}} objects.");
        for (size_t i = 0; i < tools.size(); ++i) {
            const std::string where = "tools[" + std::to_string(i) + "]";
            const ojson& tool = tools[i];
            if (!tool.is_object() || !tool.contains("type") || tool["type"] != "function")
                bad_field(where, "'" + where + "' must be an object with \"type\": \"function\".");
            if (!tool.contains("function") || !tool["function"].is_object())
                bad_field(where + ".function", "'" + where + ".function' must be an object.");
            const ojson& fn = tool["function"];
            t.names.push_back(name_of(fn, where + ".function"));
            if (present(fn, "parameters") && !fn["parameters"].is_object())
                bad_field(where + ".function.parameters", "'" + where + ".function.parameters' must be a JSON Schema object.");
            if (present(fn, "description") && !fn["description"].is_string())
                bad_field(where + ".function.description", "'" + where + ".function.description' must be a string.");
        }
        check_unique(t.names, "tools");
        if (!tools.empty()) t.specs = tools.dump();
    }
    if (present(body, "tool_choice")) {
        const ojson& c = body["tool_choice"];
        if (c.is_string()) {
            const std::string s = c.get<std::string>();
            if (s == "none") t.choice.mode = ToolChoice::Mode::none;
            else if (s == "required") t.choice.mode = ToolChoice::Mode::required;
            else if (s != "auto") bad_field("tool_choice", "'tool_choice' must be none, auto, required or {\"type\": \"function\", \"function\": {\"name\": ...}}.");
        } else if (c.is_object() && c.contains("type") && c["type"] == "function" && c.contains("function") &&
                   c["function"].is_object()) {
            t.choice.mode = ToolChoice::Mode::function;
            t.choice.name = name_of(c["function"], "tool_choice.function");
        } else {
            bad_field("tool_choice", "'tool_choice' must be none, auto, required or {\"type\": \"function\", \"function\": {\"name\": ...}}.");
        }
        if (t.choice.mode != ToolChoice::Mode::none && t.choice.mode != ToolChoice::Mode::automatic && t.names.empty())
            bad_field("tool_choice", "'tool_choice' asks for a tool call, but 'tools' offers none.");
        if (t.choice.mode == ToolChoice::Mode::function) check_choice_name(t, "tool_choice.function.name");
    }
    return t;
}

RequestTools parse_anthropic_tools(const ojson& body) {
    RequestTools t;
    if (present(body, "tools")) {
        const ojson& tools = body["tools"];
        if (!tools.is_array()) bad_field("tools", "'tools' must be an array of tool definitions.");
        ojson specs = ojson::array();
        for (size_t i = 0; i < tools.size(); ++i) {
            const std::string where = "tools[" + std::to_string(i) + "]";
            const ojson& tool = tools[i];
            if (!tool.is_object()) bad_field(where, "'" + where + "' must be an object.");
            if (present(tool, "type") && tool["type"] != "custom")
                bad_field(where + ".type", "'" + where + "' is a server tool (" + tool["type"].dump() + "); ds4 runs client tools only.");
            const std::string name = name_of(tool, where);
            if (!tool.contains("input_schema") || !tool["input_schema"].is_object())
                bad_field(where + ".input_schema", "'" + where + ".input_schema' must be a JSON Schema object.");
            ojson fn = ojson::object();
            fn["name"] = name;
            if (present(tool, "description")) {
                if (!tool["description"].is_string())
                    bad_field(where + ".description", "'" + where + ".description' must be a string.");
                fn["description"] = tool["description"];
            }
            fn["parameters"] = tool["input_schema"];
            specs.push_back(ojson{{"type", "function"}, {"function", fn}});
            t.names.push_back(name);
        }
        check_unique(t.names, "tools");
        if (!specs.empty()) t.specs = specs.dump();
    }
    if (present(body, "tool_choice")) {
        const ojson& c = body["tool_choice"];
        const std::string type = c.is_object() && c.contains("type") && c["type"].is_string() ? c["type"].get<std::string>() : "";
        if (type == "none") t.choice.mode = ToolChoice::Mode::none;
        else if (type == "any") t.choice.mode = ToolChoice::Mode::required;
        else if (type == "tool") {
            t.choice.mode = ToolChoice::Mode::function;
            t.choice.name = name_of(c, "tool_choice");
        } else if (type != "auto") {
            bad_field("tool_choice", "'tool_choice' must be {\"type\": \"auto\" | \"any\" | \"tool\" | \"none\"}.");
        }
        if (t.choice.mode != ToolChoice::Mode::none && t.choice.mode != ToolChoice::Mode::automatic && t.names.empty())
            bad_field("tool_choice", "'tool_choice' asks for a tool call, but 'tools' offers none.");
        if (t.choice.mode == ToolChoice::Mode::function) check_choice_name(t, "tool_choice.name");
    }
    return t;
}

RequestTools parse_responses_tools(const ojson& body) {
    RequestTools t;
    if (present(body, "tools")) {
        const ojson& tools = body["tools"];
        if (!tools.is_array()) bad_field("tools", "'tools' must be an array of {\"type\": \"function\", \"name\", ...} objects.");
        ojson specs = ojson::array();
        for (size_t i = 0; i < tools.size(); ++i) {
            const std::string where = "tools[" + std::to_string(i) + "]";
            const ojson& tool = tools[i];
            if (!tool.is_object() || !tool.contains("type") || !tool["type"].is_string())
                bad_field(where, "'" + where + "' must be an object with a 'type'.");
            if (tool["type"] != "function")
                bad_field(where + ".type", "'" + where + "' is a " + tool["type"].get<std::string>() +
                                               " tool; ds4 runs function tools only.");
            const std::string name = name_of(tool, where);
            if (present(tool, "parameters") && !tool["parameters"].is_object())
                bad_field(where + ".parameters", "'" + where + ".parameters' must be a JSON Schema object.");
            if (present(tool, "description") && !tool["description"].is_string())
                bad_field(where + ".description", "'" + where + ".description' must be a string.");
            if (present(tool, "strict") && !tool["strict"].is_boolean())
                bad_field(where + ".strict", "'" + where + ".strict' must be true or false.");
            ojson fn = ojson::object();
            for (const auto& [key, value] : tool.items())
                if (key != "type" && !value.is_null()) fn[key] = value;
            specs.push_back(ojson{{"type", "function"}, {"function", fn}});
            t.names.push_back(name);
        }
        check_unique(t.names, "tools");
        if (!specs.empty()) t.specs = specs.dump();
    }
    if (present(body, "tool_choice")) {
        const ojson& c = body["tool_choice"];
        const char* shape = "'tool_choice' must be none, auto, required or {\"type\": \"function\", \"name\": ...}.";
        if (c.is_string()) {
            const std::string s = c.get<std::string>();
            if (s == "none") t.choice.mode = ToolChoice::Mode::none;
            else if (s == "required") t.choice.mode = ToolChoice::Mode::required;
            else if (s != "auto") bad_field("tool_choice", shape);
        } else if (c.is_object() && c.contains("type") && c["type"] == "function") {
            t.choice.mode = ToolChoice::Mode::function;
            t.choice.name = name_of(c, "tool_choice");
        } else {
            bad_field("tool_choice", shape);
        }
        if (t.choice.mode != ToolChoice::Mode::none && t.choice.mode != ToolChoice::Mode::automatic && t.names.empty())
            bad_field("tool_choice", "'tool_choice' asks for a tool call, but 'tools' offers none.");
        if (t.choice.mode == ToolChoice::Mode::function) check_choice_name(t, "tool_choice.name");
    }
    return t;
}

void check_tool_arguments(const std::string& arguments, const std::string& where) {
    const ojson parsed = ojson::parse(arguments, nullptr, false);
    if (parsed.is_discarded() || !parsed.is_object())
        bad_field(where, "'" + where + "' must be a JSON object's text; it is not valid JSON of that shape.");
}

}  // namespace ds4
