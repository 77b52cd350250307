"""Marker words and veto patterns of signal detection, in Chinese and English.

Kept apart from the detection logic so the lists can be read (and argued about) in one place.
Chinese patterns are deliberately narrow: broad verbs (采用, 改用) over-trigger on plain prose, and
marker characters also occur inside ordinary words (固定资产, 统一社会信用代码), so 固定/统一 count
only before what they qualify (固定用, 统一保留).

Every pattern runs over untrusted text and is linear-time: repetitions are bounded or start only
where a run begins (tests/unit/memory/test_linear_patterns.py runs each over long runs of every
character class).
"""

from __future__ import annotations

import re

__all__ = [
    "APPROVAL",
    "ASSISTANT_DID",
    "CHANGE",
    "CONDITION",
    "CORRECTION",
    "DATA_OBJECT",
    "DEICTIC_ARTEFACT",
    "FACT",
    "FILE_REF",
    "FILLER",
    "FORGET",
    "HYPOTHETICAL",
    "IDIOMS",
    "IMPERATIVE",
    "INSTANCE",
    "LABEL_PREFIX",
    "LEND",
    "MEMORY_BLOCK",
    "ONE_OFF",
    "ORG_STANDARD",
    "PATTERNS",
    "POLITE_REQUEST",
    "QUESTION",
    "QUOTATION",
    "REASON",
    "REMEMBER_PREFIX",
    "REMIND_ONCE",
    "REPEAT",
    "REVISION",
    "STATEMENT_HINT",
    "STRONG",
    "TAG_QUESTION",
    "TASK_OPENER",
    "UNIVERSAL",
    "WEAK",
]

_I = re.IGNORECASE
_VERB_AFTER = (
    r"(?=用|是|为|成|放|在|保留|按|写|加|显示|设|走|使用|采用|格式|模板|顺序|位置|命名|标|改|换|口径|导出|"
    r"输出|先|都|要)"
)

# Durable markers: the user says this should hold beyond the current turn.
STRONG = re.compile(
    r"记住|记下|记一下|记得|以后|今后|往后|之后都|下次|默认|总是|一律|每次|始终|永远|一直|"
    r"从(?:现在|今天|今儿|这次|本次|此|今)(?:开始|起)|打(?:今儿|今天|现在)起|"
    # "从这周开始", "从下个月起", "自本季度起": a period that starts now and does not end
    r"[从自](?:这|本|下|今|明|次)个?(?:周|星期|礼拜|月|季度|季|年|期)(?:开始|起)|之后(?=就|按|照|一律|统一)|"
    r"\bas of (?:this|next|the next) (?:week|month|quarter|year|sprint|release)\b|"
    r"\bstarting (?:this|next) (?:week|month|quarter|year|sprint|release)\b|"
    r"\bfrom (?:this|next) (?:week|month|quarter|year|sprint|release) on(?:wards?)?\b|"
    rf"固定{_VERB_AFTER}|统一{_VERB_AFTER}|"
    r"\bremember\b|\bfrom now on\b|\bgoing forward\b|\bmoving forward\b|\bfrom here on\b|"
    r"\bnext time\b|\balways\b|\bnever\b|\bby default\b|\bin (?:the )?future\b|\bevery time\b|"
    r"\beach time\b|\bwhenever\b|\bas a rule\b|\bstarting (?:now|today)\b|"
    # "Default file type: CSV": a setting labelled as the default (only the word is the marker)
    r"^(?:the )?default(?=(?: [a-z]{2,20}){1,3}\s{0,2}[:：])",
    _I,
)
# Imperatives that are memories only when nothing marks them as a task or an instance.
WEAK = re.compile(
    r"不要|别用|别再|别加|别删|别放|别写|别把|别给|应该|不用|必须|务必|禁止|不许|不准|"
    # "don't" commands when it opens a clause or follows its addressee ("Don't round", "we don't
    # use pandas"); after any other subject it describes ("the numbers don't match").
    r"(?:^|(?<=[,;:(—–-])\s*|\b(?:please|just|and|but|so|then|you|we|i|pls)\s+)(?:don'?t|do not)\b|"
    r"\bshould\b|\bmust\b|\bavoid\b|\bstop\b",
    _I,
)
# A quantifier over every future output ("in every report", "所有报表", "for all timestamps").
UNIVERSAL = re.compile(
    r"\b(?:all|every|each|any)\s(?:of (?:the|my|our) )?(?:\w+ ){0,2}?(?:reports?|charts?|tables?|"
    r"sheets?|files?|exports?|queries|query|slides?|decks?|emails?|numbers?|amounts?|figures?|dates?|"
    r"timestamps?|outputs?|results?|dashboards?|graphs?|plots?|documents?|summaries|summary)\b|"
    r"\beverything\b|所有|全部|一律|任何|每[个份张篇期一](?:的)?(?:报表|报告|图|表|文件|邮件|查询|周报|月报|日报)",
    _I,
)
IMPERATIVE = re.compile(
    r"^(?:please )?(?:put|use|keep|show|add|make|write|name|format|round|sort|label|include|"
    r"exclude|send|cc|start|end|open|lead|group|highlight|mark|list|display|report|express|convert|"
    r"treat|count|default)\b|^(?:请)?(?:用|把|放|保留|显示|加|写|标|按|统一|默认|导出|输出|先|再)",
    _I,
)
CORRECTION = re.compile(
    r"不对|不是这样|格式错|之前说过|说过了|说过好几次|还是不行|我说的是|搞错了|又错了|"
    r"\bthat'?s (?:wrong|not right)\b|\bi told you\b|\bi said\b|\bstill not working\b|\bstill wrong\b|"
    r"\bnot what i asked\b|\byou got it wrong\b|\byou did it again\b",
    _I,
)
# Repetition: the user has said it before, so it holds beyond this output.
REPEAT = re.compile(
    r"之前说过|说过了|说过好几次|跟你说过|又错了|你又|怎么又|每次都|说过多少次|说了多少次|强调过|还是没|"
    r"仍然(?:不对|没|是)|又(?=把|被|带|写|没|是|算|漏|忘|弄|给|用|出|拆)|"
    r"\bi told you\b|\bi said\b|\blike i said\b|\bas i said\b|\bagain\b|\byou keep\b",
    _I,
)
# A preference change ("改回中文", "switch to EUR") counts as durable only when it sets a slot.
CHANGE = re.compile(
    r"(?<!把)改回|(?<!把)改成|(?<!把)换成|换回|改用|还是(?=用|保留|按|放|改|换|显示|以|可以)|"
    r"\bswitch(?:ed)?(?: (?!to\b)\w+){0,2} (?:back )?to\b|"
    r"\bchange to\b|\bgo back to\b|\bback to\b|\bagain\b",
    _I,
)
FORGET = re.compile(
    r"(?:忘掉|忘了吧|忘记吧|不用记|别记)(?:我说的|之前说的)?(?:关于)?|"
    r"(?:忘掉|忘记|删掉|删除)(?:我说的|之前说的|关于|这条|那条|记忆)|"
    r"\bforget (?:what i said )?(?:about )?|\bstop remembering\b|\bdelete the memory (?:about )?",
    _I,
)
# A changed value said as a change ("… is the window now", "改成…", "…才是…"): evidence that a
# statement revises an entry about the same thing rather than adding a second one.
REVISION = re.compile(
    r"\bnow\b|\binstead\b|\bactually\b|\bno longer\b|\bany ?more\b|\bvoid\b|\bretired\b|"
    r"\bchanged?\b|\bupdated?\b|\bswitch(?:ed)?\b|\breplaced?\b|"
    r"现在|改成|改为|换成|改用|改了|才是|提到|调到|降到|升到|变成|不再|换回|改回|"
    r"还是(?=用|保留|按|放|改|换|显示|以|可以|要)|放宽|放松|收紧|\b(?:loosen|relax|tighten)\b",
    _I,
)
# "Quick update on me: …", "Note for the team - …": a label before the statement itself.
LABEL_PREFIX = re.compile(r"^[^:：\n]{1,30}?[:：]\s{0,3}(?=\S)")
# "FYI I'm the head of …", "顺便说一下，我在…": a discourse opener before the statement itself.
DISCOURSE = re.compile(
    r"^(?:fyi|btw|by the way|heads[- ]up|just so you know|for context|for the record|oh and|"
    r"顺便说一下|顺便说下|补充一下|说明一下)[,，:：;；.。!！—–-]?\s*",
    _I,
)
# Durable facts stated without a marker word: about the user, their team, business or data.
FACT = re.compile(
    r"^(?:我是(?!说|不是|想)|我负责|我在\S{1,8}(?:部|组|团队|工作)|我在\S{1,10}?(?:做|当|负责)|我们(?:公司|团队|部门|这边)?(?:说的|用的|的|是|都)|"
    r"咱们的)|"
    r"^(?:i'?m|i am) (?:a|an|the|in charge|responsible|based)\b|"
    r"^i (?:now |currently |also )?(?:work|support|manage|run|lead|own|cover|report to|look after|head)\b|"
    r"^(?:we|our team|my team) (?:use|call|define|report|work|run|are|follow|track|measure|count|"
    r"treat|only)\b|"
    r"^(?:the )?team i (?:support|work|manage|lead)\b|"
    r"^our \w{1,30}(?: \w{1,30}){0,2} (?:is|are|starts?|begins?|ends?|uses?|means|runs?|lives?|sits?)\b|"
    r"\bfor us\b|口径|指的是|定义为|是指|\bmeans\b|\bis defined as\b|\bunless i say otherwise\b|"
    r"\b(?:when|if|whenever) i (?:ever )?(?:say|ask for|ask|mention|write)\b.{0,40}?\b(?:i|we) mean\b|"
    r"\bby\s\S{1,30}\s(?:i|we) mean\b|"
    r"除非我(?:另外|特别)?(?:说|交代)",
    _I,
)
# An organisation's standard: "use our brand palette", "按公司的模板".
# The user's role, identity or business ("I'm the regional ops lead …", "我是华东区的销售运营"):
# a fact about the user wherever it is said, even while a skill whose words it uses is in use.
ROLE = re.compile(
    r"^(?:i'?m|i am) (?:a|an|the|in charge|responsible)\b|"
    r"^i (?:now |currently |also )?(?:work (?:as|in|for|at)|manage|lead|run|head|report to|"
    r"look after)\b|^my (?:role|job|title|team|company|business)\b|"
    r"^(?:our|we are an?|we'?re an?) (?:company|business|team)\b|"
    r"^我(?:现在|目前)?(?:是(?!说|不是|想)|负责|在\S{1,8}(?:部|组|团队|工作)|在\S{1,10}?(?:做|当|负责))|"
    r"^我的(?:岗位|职位|角色|工作|公司)|^我们(?:公司|团队|部门)(?:是|做|主要)",
    _I,
)
# A follow-up that asks for a different size or amount of something ("make it shorter", "still
# too long", "再压一压", "太长了"): with a bound in the same unit as a remembered rule, it
# revises that rule even without naming what it measures.
SIZE_CHANGE = re.compile(
    r"\b(?:short|long|small|bigg|larg|tight|few|brief)er\b|\btoo (?:long|short|big|small|many|few|wordy)\b|"
    r"\b(?:trim|cut|shrink|condense|tighten)\b|\bmore concise\b|"
    r"压一压|压缩|压到|再短|缩短|精简|删减|太长|太短|太多|太少|再少|再多|再长|"
    # a bound made looser or stricter: "摘要可以放宽点，五句以内", "relax the limit to 5"
    r"放宽|放松|收紧|严一点|松一点|\b(?:loosen|relax|tighten)\b|\b(?:strict|loos)er\b",
    _I,
)
ORG_STANDARD = re.compile(
    r"\bour (?:brand|company|corporate|house|team'?s?|standard|style|group)\b|"
    r"公司(?:的|主色|规范|模板|标准|统一)|我们的(?:规范|模板|标准)|品牌色",
    _I,
)
# "schema.table" names (core.dim_customer, ods.order_detail): where the user's data lives.
DATA_OBJECT = re.compile(
    r"(?<![\w.])[A-Za-z_][A-Za-z0-9_]{1,30}\.[A-Za-z_][A-Za-z0-9_]{2,60}(?!\w)(?!\.\w)"
)
# Phrases that contain a marker word but mean nothing durable.
IDIOMS = re.compile(
    r"不要紧|不要客气|不要着急|别客气|别着急|以后再说|下次再说|以后的事|要我提醒|我提醒你|"
    r"\bnever mind\b|\bdon'?t worry\b|\bno worries\b|\bremember when\b|\bdo you remember\b|"
    r"\bhave to (?:keep )?remind(?:ing)? you\b|\bkeep reminding you\b",
    _I,
)
TAG_QUESTION = re.compile(
    r"[，,]?\s{0,3}(?:记住了吗|记得吗|对吧|好吗|remember|right|ok|okay)\s{0,3}[？?]\s{0,3}$", _I
)
QUESTION = re.compile(
    r"[？?]\s{0,8}$|吗\s{0,3}[。.]?$|呢\s{0,3}[。.]?$|怎么办|是几|是多少|为什么|为啥|"
    r"^(?:what|how|why|where|which|who|can you|could you|do you|does|is it|are you|will you|"
    r"would you|shall we|should we)\b|"
    r"^when (?:is|are|was|were|do|does|did|will|can|should|would|could)\b",
    _I,
)
POLITE_REQUEST = re.compile(r"^(?:could|can|would|will) you (?:please )?", _I)
HYPOTHETICAL = re.compile(
    r"\bwhat if\b|\bif i (?:said|say|told|tell|asked|ask|wanted|want|were)\b|\bsuppose\b|"
    r"\bhypothetically\b|\bimagine\b|假如|假设|如果我(?:说|让|要|叫)|要是我|要是以后|万一|"
    # the conditional mood: "if the CFO ever wants it, we'd need …", "要是…的话，是不是就得…"
    r"\b(?:we|you|i|they|it)(?:'d| would) (?:need|have to|want|be|get|end up)\b|"
    r"(?:如果|要是)[^，。,.]{1,30}的话[^。.]{0,30}(?:是不是|会不会)",
    _I,
)
# Someone else's words: a speaker or a source followed by a quote, or reported speech.
QUOTATION = re.compile(
    r"(?:说|写着|写的是|提到|规定|(?<!\bi )(?<!\bwe )(?<!\byou )\bsays?\b|\bsaid\b|\bsaying\b|\bwrote\b|\bwrites\b|\baccording to\b|"
    r"\bclaims?\b|\brecommends?\b)\s{0,2}[:：,，]?\s{0,2}[“\"'「『‘]|"
    r"(?:\bdocs?\b|\bdocumentation\b|\breadme\b|\bmanual\b|\bvendor\b|\bguide\b|\barticle\b|\bblog\b|"
    r"\bmanager\b|\bboss\b|\bcolleague\b|\bteam lead\b)\S{0,3}\s(?:\w+ ){0,2}?(?:says?|said|recommends?|"
    r"claims?|suggests?|keeps? saying)\b|"
    r"(?:老板|领导|同事|文档|手册|说明书|readme|README)[^，。,]{0,8}(?:说|写着|提到|建议|要求)",
    _I,
)
# The current output, file or time: a request about it is not a memory.
ONE_OFF = re.compile(
    r"(?<!从)这次(?!开始|起)|(?<!从)本次(?!开始|起)|这一次|这回|这份|这一版|刚才|暂时|今天|明天|先这样|"
    # "临时改一下" limits the request; "临时文件" / "临时的 log" names a kind of thing
    r"临时(?!的|文件|目录|表|数据|变量|结果|缓存|脚本|工作区|路径)|"
    # "这个饼图", "那份周报", "这张柱状图": one artefact named by a deictic before its noun
    r"(?<![A-Za-z0-9_])(?<![A-Za-z0-9_] )[这那](?:个|份|张|篇)[\u4e00-\u9fff]{0,3}?"
    r"(?:图|表|文件|报告|文档|页面|邮件|幻灯片)|"
    r"(?<![A-Za-z0-9_])(?<![A-Za-z0-9_] )[这那]张|[这那]一?(?:列|行|页|条|版)|[这那]一张|下次\S{1,6}?(?:前|之前)|"
    r"\bthis time\b|\bjust for this\b|\bfor now\b|\bthis once\b|\bjust this once\b|\btoday\b|"
    r"\btomorrow\b|\bthis one\b|\bthat one\b|\bi meant\b|\bin this (?:sheet|file|table|chart|deck|"
    r"slide|report|email|query|version|draft)\b|"
    r"\b(?:this|that|these|those) (?:column|row|cell|invoice|figure|number|ticket)s?\b|"
    r"\bfor this (?:one|deck|report|chart|slide|file|table|"
    r"query|sheet|email|version|draft)\b|\bbefore (?:the )?next (?:meeting|call|review)\b",
    _I,
)
# The one thing a complaint points at ("这一列", "this column"): unlike "这次" / "just for this",
# it does not limit a general rule said in the same sentence.
INSTANCE = re.compile(
    r"[这那]一?(?:列|行|页|条|版|张)|(?:this|that|these|those) (?:column|row|cell|invoice|figure|"
    r"number|ticket)s?",
    _I,
)
# One artefact named by a deictic before its noun ("这个饼图", "那份留存表"): in a report of a
# repeated failure it points at the instance the failure was seen in, like INSTANCE.
DEICTIC_ARTEFACT = re.compile(
    r"[这那](?:个|份|张|篇)[\u4e00-\u9fff]{0,3}?(?:图|表|文件|报告|文档|页面|邮件|幻灯片)"
)
# "Remember to attach it" / "记得把…" is a reminder for this task, not a standing rule.
REMIND_ONCE = re.compile(
    r"\b(?:remember|don'?t forget|make sure) to\b|^(?:请|你)?(?:记得|别忘了|不要忘了|别忘记)(?!吗|了吗)",
    _I,
)
# A leading "Please remember:" / "请记住：": it makes the sentence durable and is not part of it.
REMEMBER_PREFIX = re.compile(
    r"^(?:please\s{1,3})?(?:remember(?:\s{1,3}(?:this|that))?|note(?:\s{1,3}this)?|"
    r"for future reference|keep in mind|for the record)\s{0,3}(?:[:：\-–—]{1,2})\s{0,3}|"
    r"^(?:请|你)?(?:务必|一定要?)?(?:记住|记一下|记下|记着|记得)(?:这一点|这点|这个|了)?\s{0,3}[:：]\s{0,3}",
    _I,
)
# A short sentence that only says "this holds from now on / don't do it again": it lends
# durability to its neighbour ("…保留一位小数。以后都照这个来。", "… Don't make me say it twice.").
LEND = re.compile(
    r"别再|不要再|不许再|下次别|别忘|不要忘|别漏|一直有效|都有效|都适用|都这样|都照|"
    r"\bagain\b|\btwice\b|\bmistake\b|\bno exceptions?\b|\bfull stop\b|\bwithout exception\b|"
    r"\b(?:that|this|it) (?:goes|applies|holds) for\b|\bkeep (?:it|them|that|this) (?:that|this) way\b|"
    r"\bfor (?:all|every|each) \w{2,20}\b|\bthe default\b|"
    # "Every week.", "That's a team-wide thing.", "Same goes for any model you touch.", "That's
    # how I always want it.", "I've told you this before.": durability said without a marker word
    r"\bevery (?:single )?(?:day|week|month|quarter|year|run|report|deck|memo|digest)\b|"
    r"\b(?:team|company|org|organi[sz]ation)[- ]wide(?: thing| rule| standard| convention)?\b|"
    r"\bsame (?:goes|applies|holds) for (?:any|every|all|each) \w{2,20}(?: (?:you|we) \w{2,20})?\b|"
    r"\bthat'?s how (?:i|we)\s+(?:always\s+)?(?:want|like|do)\s+(?:it|them|this|that)\b|"
    r"\b(?:i'?ve|i have) (?:told|said|asked) (?:you )?(?:(?:this|that|it) )?(?:before|already)\b|"
    r"全公司都|整个团队都|团队统一|"
    # "that definition applies across every report", "这是公司口径", "That's the team standard":
    # the sentence names the one before it as a rule that holds everywhere
    r"\b(?:applies|apply|holds|hold|goes) (?:across|to|for|in) (?:every|all|each|any) \w{2,20}\b|"
    r"\bthat'?s (?:our|the company'?s?|the team'?s?|the house|the) (?:definition|standard|rule|"
    r"convention|policy|way we do it)\b|"
    r"[这那]是(?:我们|公司|团队|全公司|集团|部门)(?:的)?(?:口径|规定|标准|规范|要求|惯例|做法)",
    _I,
)
# Approval of what the agent just did, made general: "do it like that every time", "以后都照这个来".
APPROVAL = re.compile(
    r"\blike (?:that|this)\b|\b(?:that|this|the same) way\b|\bkeep (?:doing )?(?:it|that|this)\b|"
    r"\bmake (?:that|this|it) (?:the )?default\b|"
    r"照(?:这个|这样|此|着)|就这么|这么(?:办|弄|做|画|来|干)|这样(?:做|弄|办|来|出)|按这个|照这|"
    # "都这么处理", "都这样放": a manner word before the verb of the approved change
    r"[这那][样么](?:处理|放|摆|排|写|画|改|标|显示|设置|设)|"
    r"这个(?:格式|口径|办法|做法|样子|方法)",
    _I,
)
TASK_OPENER = re.compile(
    r"^(?:请?帮我|请帮|给我|把|麻烦|画|做|生成|写|查|导出|(?:please )?(?:make|create|draw|give me|write|"
    r"generate|show me|export|fix|pull|run|send|plot|build))",
    _I,
)
# "写 SQL 的时候…", "whenever you…": a habit, even when it opens like a task.
CONDITION = re.compile(
    r"的时候|时候|\bwhen(?:ever)? you\b|\bwhen (?:writing|exporting|making)\b", _I
)
FILE_REF = re.compile(
    r"(?<![\w./-])[\w./-]{1,120}\.(?:xlsx|xls|csv|json|txt|pdf|docx|pptx|parquet)\b", _I
)
# Clauses that explain rather than instruct; they stay attached to their instruction.
REASON = re.compile(
    r"因为|会出错|不方便|看着|太刺眼|\bbecause\b|\bsince\b|\bneeds?\b|\bi'?m in\b|\bchokes?\b", _I
)
# Clauses that carry no content of their own: dropped from an entry's text.
FILLER = re.compile(
    r"^(?:总是)?忘了(?:跟你)?说|^顺便说一下|^顺便|^对了|^另外|^by the way|^btw|^like i said(?: before)?|"
    r"^as i said(?: before)?|^actually|^ugh|^说过好几次了|^说过了|^跟你说过了?|^我之前说过|^之前说过",
    _I,
)
# The user describing the assistant's mistake ("你又把表头合并了", "you did it again").
ASSISTANT_DID = re.compile(
    r"^(?:你|您)(?:又|怎么又|还是|总是|老是)|^you (?:did it again|did|keep|again|still|always)\b",
    _I,
)
# Words that make a marker-free sentence worth a look (a skill, tool, process or format).
STATEMENT_HINT = re.compile(
    r"格式|字段|口径|流程|步骤|模板|excel|sql|图表|报表|format|template|column|process|workflow|chart|report",
    _I,
)
# The block this pipeline injects: never read it back as evidence (feedback-loop guard).
MEMORY_BLOCK = re.compile(
    r"(?m)^#[ \t]{0,4}(?:个性化记忆|Personal memory)[^\n]*\n(?:(?!#[ \t]).*(?:\n|\Z))*"
)

# name → pattern, for the linear-time tests.
PATTERNS: dict[str, re.Pattern[str]] = {
    name: value
    for name, value in dict(globals()).items()
    if name.isupper() and isinstance(value, re.Pattern)
}
