"""My tools for the assistant. 我给助手写的工具。

What counts as what in this file (文件里什么算什么):
- A TOOL is the function named like the file (notes.py -> def notes) or any function marked
  @tool. The model sees its name, the first paragraph of its docstring and its parameters
  (from the type hints; the "Args:" lines describe them).
  工具：与文件同名的函数，或标了 @tool 的函数。
- CALLBACKS have these exact names: before_agent_callback, after_agent_callback,
  before_model_callback, after_model_callback, before_tool_callback, after_tool_callback.
  回调：必须用这些名字。
- Any other function is a helper; the model never sees it. 其他函数只是辅助函数。
- STATE: get_variable / set_variable / remove_variable, or context.variables.
- HTTP: ces_requests.get/post/... reaches only the hosts you allow for this file (list below the
  editor). A file that sends POST, PUT, PATCH or DELETE waits for your approval on every call,
  and the card shows each request. preview_<tool>(...) words the card.
  网络请求只能访问你为此文件允许的主机；会写入的工具每次都要你批准。
"""

from typing import Optional


@tool
def count_words(text: str, unique: Optional[bool] = None) -> dict:
    """Counts the words of a text.

    Args:
        text: The text to count.
        unique: Count each distinct word once.
    """
    words = text.split()
    if unique:
        words = set(words)
    total = get_variable("words_counted", 0) + len(words)
    set_variable("words_counted", total)
    return {"words": len(words), "counted_so_far": total}


def before_model_callback(callback_context, llm_request):
    """Runs before every model call. Edit llm_request, or return an LlmResponse to answer
    without the model. Returning None lets the call go ahead."""
    calls = callback_context.get_variable("model_calls", 0)
    callback_context.set_variable("model_calls", calls + 1)
    return None
