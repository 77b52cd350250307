"""Marker words and veto patterns of signal detection, in Chinese and English.

Kept apart from the detection logic so the lists can be read (and argued about) in one place.
Chinese patterns are deliberately narrow: broad verbs (采用, 改用) over-trigger on plain prose.
"""

from __future__ import annotations

import re

__all__ = [
    "CHANGE",
    "CORRECTION",
    "FACT",
    "FILE_REF",
    "FORGET",
    "HYPOTHETICAL",
    "IDIOMS",
    "MEMORY_BLOCK",
    "ONE_OFF",
    "POLITE_REQUEST",
    "QUESTION",
    "QUOTATION",
    "REASON",
    "STATEMENT_HINT",
    "STRONG",
    "TAG_QUESTION",
    "TASK_OPENER",
    "WEAK",
]

_I = re.IGNORECASE

# Durable markers: the user says this should hold beyond the current turn.
STRONG = re.compile(
    r"记住|记下|记一下|记得|以后|今后|往后|下次|默认|总是|一律|固定|统一|每次|始终|永远|"
    r"\bremember\b|\bfrom now on\b|\bgoing forward\b|\bnext time\b|\balways\b|\bnever\b|"
    r"\bby default\b|\bin (?:the )?future\b|\bevery time\b|\beach time\b",
    _I,
)
# Imperatives that are memories only when nothing marks them as a task or an instance.
WEAK = re.compile(
    r"不要|别用|别再|应该|不用|必须|务必|禁止|\bdon'?t\b|\bdo not\b|\bshould\b|\bmust\b|\bavoid\b",
    _I,
)
CORRECTION = re.compile(
    r"不对|不是这样|格式错|之前说过|说过了|还是不行|我说的是|搞错了|又错了|"
    r"\bthat'?s (?:wrong|not right)\b|\bi told you\b|\bi said\b|\bstill not working\b|\bstill wrong\b|"
    r"\bnot what i asked\b|\byou got it wrong\b",
    _I,
)
# A preference change ("改回中文", "switch to EUR") counts as durable only when it sets a slot.
CHANGE = re.compile(
    r"(?<!把)改回|(?<!把)改成|(?<!把)换成|改用|\bswitch(?:ed)? to\b|\bchange to\b", _I
)
FORGET = re.compile(
    r"(?:忘掉|忘了吧|忘记|不用记|别记|删掉|删除)(?:我说的|之前说的)?(?:关于)?|"
    r"\bforget (?:what i said )?(?:about )?|\bstop remembering\b|\bdelete the memory (?:about )?",
    _I,
)
FACT = re.compile(
    r"^(?:我是(?!说|不是|想)|我负责|我们(?:公司|团队|部门|这边)?(?:说的|用的|的)|咱们的)|"
    r"^(?:i'?m|i am) (?:a|an|the)\b|^i work (?:as|in|for|at)\b|^we (?:use|call|define)\b|"
    r"^our \w+(?: \w+)? (?:is|are|starts?|uses?|means)\b|口径|指的是|定义为|\bmeans\b|\bis defined as\b",
    _I,
)
# Phrases that contain a marker word but mean nothing durable.
IDIOMS = re.compile(
    r"不要紧|不要客气|不要着急|别客气|别着急|以后再说|下次再说|\bnever mind\b|\bdon'?t worry\b|"
    r"\bno worries\b|\bremember when\b|\bdo you remember\b",
    _I,
)
TAG_QUESTION = re.compile(
    r"[，,]?\s*(?:记住了吗|记得吗|对吧|好吗|remember|right|ok|okay)\s*[？?]\s*$", _I
)
QUESTION = re.compile(
    r"[？?]\s*$|吗\s*[。.]?$|呢\s*[。.]?$|怎么办|是几|是多少|"
    r"^(?:what|how|why|when|where|which|who|can you|could you|do you|does|is it|are you|will you)\b",
    _I,
)
POLITE_REQUEST = re.compile(r"^(?:could|can|would|will) you (?:please )?", _I)
HYPOTHETICAL = re.compile(
    r"\bwhat if\b|\bif i (?:said|say|told|tell|asked|ask|wanted|want|were)\b|\bsuppose\b|"
    r"\bhypothetically\b|\bimagine\b|假如|假设|如果我(?:说|让|要|叫)|要是我|万一",
    _I,
)
QUOTATION = re.compile(
    r"(?:说|写着|写的是|提到|\bsays?\b|\bsaid\b|\bwrote\b|\bwrites\b|\baccording to\b)\s*[:：]?\s*[“\"'「『]|"
    r"[“\"「『][^”\"」』]{6,}[”\"」』]|(?<!\w)'[^']*\s[^']*\s[^']*'(?!\w)",
    _I,
)
ONE_OFF = re.compile(
    r"这次|本次|这一次|这回|这份|暂时|临时|今天先|先这样|\bthis time\b|\bjust for this\b|\bfor now\b|"
    r"\bthis once\b|\bjust this once\b|\bfor this (?:one|deck|report|chart|slide|file|table|query)\b",
    _I,
)
TASK_OPENER = re.compile(
    r"^(?:请?帮我|请帮|给我|把|麻烦|画|做|生成|写|查|导出|(?:please )?(?:make|create|draw|give me|write|"
    r"generate|show me|export|fix))",
    _I,
)
FILE_REF = re.compile(r"[\w./-]+\.(?:xlsx|xls|csv|json|txt|pdf|docx|pptx|parquet)\b", _I)
# Clauses that explain rather than instruct; they stay attached to their instruction.
REASON = re.compile(r"因为|会出错|不方便|看着|\bbecause\b|\bsince\b|\bneeds?\b|\bi'?m in\b", _I)
# Words that make a marker-free sentence worth a look (a skill, tool, process or format).
STATEMENT_HINT = re.compile(
    r"格式|字段|口径|流程|步骤|模板|excel|sql|图表|报表|format|template|column|process|workflow|chart|report",
    _I,
)
# The block this pipeline injects: never read it back as evidence (feedback-loop guard).
MEMORY_BLOCK = re.compile(r"(?ms)^#\s*个性化记忆.*?(?=^#\s|\Z)")
