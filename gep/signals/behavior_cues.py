"""The rules behind :mod:`gep.signals.behavior`: cue lists per language (English, Chinese, Japanese) and the
functions that read them. Pure: text in, a :class:`Hit` (summary, intensity) or None out.

Each summary is chosen from fixed phrases, so what is stored describes the behaviour and quotes nothing;
only an English preference without a known topic keeps a few filtered words (see :func:`_gist`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from gep.core.sanitize import redact
from gep.signals.sources import TranscriptExchange

_I = re.IGNORECASE


@dataclass(frozen=True)
class Hit:
    summary: str
    intensity: int


def _any(*patterns: str, flags: int = _I) -> re.Pattern[str]:
    return re.compile("|".join(f"(?:{p})" for p in patterns), flags)


# ------------------------------------------------------------------ text


_CODE_BLOCK = re.compile(r"```.*?(?:```|\Z)", re.S)
_INLINE_CODE = re.compile(r"`[^`\n]*`")
_URL = re.compile(r"\bhttps?://\S+|\bwww\.\S+")
_QUOTED = re.compile(r"^\s*>.*$", re.M)
EMOJI = re.compile("[\U0001f300-\U0001faff\u2600-\u27bf\u2b50\u2b55\u2705\u274c\u2764]")
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uf900-\ufaff]")
_EXCLAIM = re.compile(r"[!！]")


def clean(text: str) -> str:
    """The part of a message that is the person talking: code, URLs and quoted lines removed, spaces
    collapsed, the first 600 characters (a pasted log after them says nothing about how they feel)."""
    text = _QUOTED.sub(" ", _URL.sub(" ", _INLINE_CODE.sub(" ", _CODE_BLOCK.sub(" ", text))))
    return " ".join(text.split())[:600]


def is_cjk(text: str) -> bool:
    return len(_CJK.findall(text)) * 3 >= len(text.replace(" ", "")) > 0


_ACK = frozenset(
    "ok okay k kk sure yes yep yeah ya y no nope fine alright right hmm hm mhm continue next done noted cool "
    "proceed 好 好的 嗯 嗯嗯 行 可以 是 是的 对 對 继续 繼續 收到 了解 はい うん 了解です 続けて 次 okk".split())
_ACK_PHRASES = ("go on", "go ahead", "got it", "sounds good", "carry on")
_ACK_SPLIT = re.compile(r"[\s.,!?。，！？、~…]+")


def is_ambiguous(text: str) -> bool:
    """A bare acknowledgement ("ok", "sure, go ahead", "好的", "はい"): too neutral to mean anything."""
    words = " ".join(w for w in _ACK_SPLIT.split(text.strip().lower()) if w)
    for phrase in _ACK_PHRASES:
        words = words.replace(phrase, " ")
    return bool(text.strip()) and all(w in _ACK for w in words.split())


def shouting(text: str) -> bool:
    """Mostly capital letters over at least three words (not one acronym)."""
    words = re.findall(r"[A-Za-z]{2,}", text)
    letters = "".join(words)
    return len(words) >= 3 and sum(c.isupper() for c in letters) >= 0.8 * len(letters)


def exclamations(text: str) -> int:
    return len(_EXCLAIM.findall(text))


def _asks(agent: str) -> bool:
    """Whether the agent's turn ended with a question (then "no" answers it, it corrects nothing)."""
    tail = EMOJI.sub("", agent).rstrip()
    return tail.endswith(("?", "？"))


def _in_question(text: str, start: int) -> bool:
    """Whether the sentence holding position ``start`` is a question."""
    m = re.compile(r"[.!?。！？\n]").search(text, start)
    return m is not None and m.group(0) in "?？"


# ------------------------------------------------------------------ correction

_CHANGED_MIND = _any(r"changed my mind|change of plans?|never ?mind|on second thought|scratch that",
                     r"改主意|改變主意|算了|気が変わ")
_SELF_CORRECTION = _any(r"\b(?:sorry|oops|my bad|typo)\b|\bi (?:wrote|typed|gave you) the wrong\b",
                        r"打错|打錯|写错了我|我写错|我寫錯|書き間違")
_STRONG = _any(r"\b(?:again|already|told you|how many times)\b", r"又|已经说|已經說|また|何度")

# (kind, pattern, needs an agent turn that did not end with a question)
_CORRECTIONS: list[tuple[str, re.Pattern[str], bool]] = [
    ("misunderstood", _any(
        r"\byou(?:'ve| have)? (?:misunderstood|misread|misunderstand|got (?:it|that|this|me) wrong)\b",
        r"\byou(?:'re| are) wrong\b", r"\bnot what i (?:asked|meant|wanted|said|requested)\b",
        r"你(?:理解|搞|弄|听|聽|看)(?:错|錯)了|不是我(?:要|想要)的|我(?:要|说|說)的不是",
        r"そうじゃな(?:く|い)|そうではなく|誤解|そういう(?:意味|こと)じゃ"), False),
    ("unrequested", _any(
        r"(?:^|[.!?]\s+)i (?:didn't|did not|never) (?:ask|tell|want)",
        r"\bwhy (?:did|would) you (?:remove|delete|change|rewrite|drop|add|touch|break|ignore|revert|push|rename"
        r"|move|skip|commit|run)\b", r"\bwho (?:asked|told) you to\b",
        r"我?(?:没|沒)(?:有)?(?:让|讓|叫|要)你|谁(?:让|叫)你|誰(?:讓|叫)你",
        r"頼んで(?:い)?な|頼んでません|お願いしてな|勝手に"), False),
    ("omission", _any(
        r"\byou (?:forgot|missed|skipped|ignored|left out|overlooked)\b",
        r"你(?:漏|忘)(?:了|掉)", r"抜けて(?:いる|います|る)|忘れて(?:いる|います|る)|漏れて(?:いる|います|る)"), False),
    ("stop", _any(
        r"^(?:please )?(?:don't|do not|stop) (?:do(?:ing)? )?(?:that|this|it)\b", r"^stop[.!]*$",
        r"\b(?:undo|revert) (?:that|this|it|your (?:last )?changes?)\b",
        r"^(?:别|別|不要)(?:这样|這樣|这么做|這麼做)", r"^(?:停|停下|住手)[！!。]*$", r"^(?:やめて|止めて|ストップ)"), False),
    ("restated", _any(
        r"(?:^|[.!?;,]\s*)(?:no,? )?i (?:said|meant|asked for|asked you to)\b", r"\bto clarify\b",
        r"我(?:的意思|说的|說的)是|我是说|我是說", r"と言いました|って言った|と言った|という意味"), False),
    ("factual", _any(
        r"\b(?:that|this|it)(?:'s| is| was) (?:wrong|incorrect|not (?:right|correct|true|accurate))\b",
        r"^(?:wrong|incorrect)\b", r"\bit should (?:be|return|use|say) [^.?!]{1,60},? not\b",
        r"^(?:不对|不對)(?!称|稱|劲|勁)|^(?:错了|錯了)|^(?:错|錯)[，,。！!]|^不是(?:这样|這樣|的)",
        r"(?:说|說|搞|弄|写|寫|算)(?:错|錯)了",
        r"^(?:違う|違います|ちがう|ちがいます)(?:よ|って|ね)?(?:[、。,.!！\s]|$)",
        r"間違って(?:いる|います|る|ます)|間違い(?:です|だ)|正しくない"), False),
    ("contradiction", _any(
        r"^(?:they|it|that|this) (?:don't|doesn't|didn't|isn't|aren't|wasn't|weren't)\s*[,.!;]",
        r"^(?:没有|沒有|并没有|並沒有)[，,]"), True),
    ("factual", _any(
        r"^(?:no+|nope|nah)(?:\s*[,.!:;—-]|\s+no\b)(?!\s*(?:problem|worries|need|thanks|thank|rush|pressure|idea"
        r"|way|doubt|biggie|that'?s fine|it'?s fine))\s*\S",
        r"^actually,? (?:it|that|this|the|you|we|there|they)\b[^?]*\b(?:is|are|was|were|isn't|aren't|should"
        r"|needs?|'s|called|named|lives|belongs|goes)\b",
        r"^not (?!sure|yet|now|really|bad|today|quite|exactly|at all|a big deal|necessarily|much|too)\w+"
        r"(?: \w+){0,3}\s*[,;—-]",
        r"^不是\s*(?!很|太|特别|特別|非常|说|說)[^，,。]{1,20}[，,]", r"じゃなくて|ではなく"), True),
]

CORRECTION_SUMMARY = {
    "misunderstood": "User said the agent misunderstood the request",
    "unrequested": "User said the agent did something they had not asked for",
    "omission": "User said the agent left out part of the request",
    "stop": "User told the agent to stop what it was doing",
    "restated": "User restated what they had asked for",
    "factual": "User corrected something the agent said or assumed",
    "contradiction": "User contradicted the agent's report of its work",
}


def correction_kind(text: str, agent: str) -> str | None:
    """Which kind of correction ``text`` is, in reply to the agent turn ``agent`` (None: not one)."""
    if not agent.strip() or _CHANGED_MIND.search(text):
        return None
    asked = _asks(agent)
    for kind, pattern, not_after_question in _CORRECTIONS:
        if not_after_question and asked:
            continue
        if pattern.search(text) is None:
            continue
        if kind == "restated" and _SELF_CORRECTION.search(text):
            continue
        return kind
    return None


def correction(text: str, agent: str) -> Hit | None:
    kind = correction_kind(text, agent)
    if kind is None:
        return None
    strong = exclamations(text) >= 2 or shouting(text) or _STRONG.search(text) is not None
    return Hit(CORRECTION_SUMMARY[kind], 5 if strong else 4)


# ------------------------------------------------------------------ preference

_PERSIST_EN = _any(
    r"\b(?:from now on|going forward|in (?:the )?future|next time(?! (?:i|we)\b)|from here on|by default)\b")
_PERSIST_CJK = _any(
    r"(?:以后|以後|下次|今后|今後|从现在开始|從現在開始|往后|往後|从今以后|從今以後)[^。！？!?]{0,20}?"
    r"(?:请|請|要|别|別|不要|不用|直接|先|都|就|记得|記得|用|给|給|问|問|写|寫)",
    r"(?:次から|次回から|次回は|今後|これから(?:は)?|以後|毎回|いつも)[^。！？!?]{0,30}"
    r"(?:ください|下さい|して|しないで|なくていい|なくて良い|ように|こと|お願い)")
_IMPERATIVE = _any(r"\b(?:please|you|me|don't|do not|always|never|ask|use|send|show|give|write|keep|make|run"
                   r"|check|tell|add|put|reply|respond|answer|avoid|stop|be)\b")
_FAREWELL = _any(r"\bsee you\b|\buntil next time\b|\btalk (?:to you )?(?:next time|soon)\b")
_PREFER = _any(r"\bi(?:'d| would)? (?:prefer|rather)\b(?P<rest>[^.!?]*)")
_PREFER_CJK = re.compile(r"我(?:更|比较|比較|还是|還是)?(?:喜欢|喜歡|偏好|倾向于|傾向於)(?P<rest>[^。！？!?]*)")
_PREFER_JA = re.compile(r"(?P<rest>[^、。！？!?]{0,12})の(?:方|ほう)が(?:好き|いい|良い)")
_ABOUT_AGENT = _any(
    r"\b(?:you|your|answers?|repl(?:y|ies)|responses?|explanations?|summar\w*|bullet\w*|lists?|tables?|emojis?"
    r"|format\w*|markdown|tone|style|languages?|english|chinese|japanese|short|shorter|brief|concise|detail\w*"
    r"|verbose|code|comments?|docstrings?|type hints|tests?|commits?|diffs?|links?|tabs|spaces|indent\w*"
    r"|snake_case|camelcase|quotes|examples?|steps|questions|confirm\w*|plain text|when|if|messages?|prose"
    r"|paragraphs?)\b",
    r"你|回答|回复|回覆|格式|列表|條列|条列|表格|表情|简短|簡短|简洁|簡潔|详细|詳細|代码|程式碼|注释|註解|测试|測試"
    r"|提交|中文|英文|日文|链接|連結|解释|解釋|说明|說明|方式",
    r"箇条書き|形式|リンク|コード|コメント|説明|日本語|英語|短い|簡潔|答え|返事|回答")
_PREFERENCES = _any(
    r"\bi (?:really )?(?:like|love|hate|dislike|can't stand|don't like|do not like)(?: it)? when you\b",
    r"\b(?:that'?s|this is) how i (?:like|prefer|want)\b",
    r"\b(?:it(?:'s| is| would be|'d be| will be)) (?:better|nicer|easier|best) (?:if|when) you\b",
    r"\b(?:i|we) (?:don't|do not) need (?:the |any |all (?:the|these) |long |detailed |your )?"
    r"(?:explanations?|details|summar(?:y|ies)|context|commentary|intros?|apolog\w*)\b",
    r"\bno need (?:to|for) (?:ask|explain|apologi|confirm|summari|repeat|check with me|tell me)\w*",
    r"\bjust (?:give|send|show|tell) me\b", r"^(?:less|fewer) \w+(?: \w+)?,? (?:and )?more \w+",
    r"^(?:please )?(?:always|never) (?:use|add|write|ask|show|run|push|commit|delete|remove|change|touch|create"
    r"|explain|include|put|make|say|reply|respond|answer|send|give|tell|check|test|leave|apologi\w*|guess|assume"
    r"|start|end|format|keep|be|do|mention|merge|deploy|rewrite|open|close|skip)\b",
    r"^(?:please )?(?:don't|do not|never|stop|quit) (?!do(?:ing)? (?:that|this|it)\b)(?:\w+ )?"
    r"(?:add|use|writ|ask|apologi|explain|repeat|summari|includ|put|mak|say|start|creat|rewrit|reformat|touch"
    r"|chang|delet|remov|push|commit|guess|assum|giv|send|show|print|repl|respond|answer|over|run|bother)\w*",
    r"\b(?:keep|make) (?:it|them|your (?:answers?|replies|responses|messages|summaries))\s+(?:\w+ ){0,2}"
    r"(?:short|shorter|brief|concise|simple|focused)\b",
    r"\bbe (?:more |a bit more |less )?(?:concise|brief|direct|terse|formal|casual|specific)\b",
    r"\b(?:too|way too|so|far too) (?:long|verbose|wordy|chatty)\b",
    r"\b(?:reply|respond|answer|write|talk|speak) (?:to me )?in (?:english|chinese|japanese|french|german"
    r"|spanish|korean|portuguese|italian)\b",
    r"\buse (?:[\w-]+ ){0,2}(?:everywhere|throughout|consistently|always|by default)\b",
    r"我希望你|(?:不用|不需要|不必)(?:每次)?(?:都)?(?:再)?(?:解释|解釋|说明|說明|道歉|问我|問我|确认|確認|总结|總結)",
    r"(?:简短|簡短|简洁|簡潔|短|详细|詳細)(?:一点|一點|一些)|(?:太长|太長|太啰嗦|太囉嗦)了?",
    r"用(?:中文|英文|日文|繁體中文|繁体中文|简体中文|簡體中文|英语|英語)(?:回答|回复|回覆|写|寫|交流)",
    r"(?:别|別|不要)(?:再|总是|總是|老是)?(?:问|問|加|写|寫|道歉|解释|解釋)", r"直接(?:给|給|发|發|告诉|告訴)我",
    r"(?:説明|解説|謝罪|前置き|確認)(?:は|も)?(?:いらない|要らない|不要|いりません|しなくていい|しなくて良い|なくていい)",
    r"(?:もっと|より)(?:簡潔|短く|詳しく|丁寧|シンプル|簡単)", r"(?:短く|簡潔に)(?:して|答えて|まとめて|書いて)",
    r"長すぎ", r"(?:日本語|英語|中国語)で(?:返事|答え|回答|書い|話し|お願い)", r"必要な(?:所|ところ|とき)だけ",
    r"なくて(?:いい|良い)です")
_PLEASE_JUST = _any(r"\bplease just\b|\bjust (?:give|send|show|tell) me\b|^(?:please )?(?:always|never) ")

_NEGATIVE = _any(r"\b(?:don't|do not|no|never|stop|without|less|fewer|not|only|skip|drop|omit|cut)\b",
                 r"不要|别|別|不用|不需要|不必|只|いらない|要らない|不要|なくて|しないで|だけ")
_LANGUAGES = [(re.compile(p, _I), name) for p, name in (
    (r"traditional chinese|繁體中文|繁体中文|繁體", "Traditional Chinese"), (r"\bchinese\b|中文|中国語", "Chinese"),
    (r"\bjapanese\b|日文|日本語", "Japanese"), (r"\benglish\b|英文|英语|英語", "English"),
    (r"\b(french|german|spanish|korean|portuguese|italian)\b", ""))]
# (topic, phrase when wanted, phrase when not wanted), first match wins
_TOPICS: list[tuple[re.Pattern[str], str, str]] = [(re.compile(p, _I), yes, no) for p, yes, no in (
    (r"\b(?:rewrite|touch)\b.*\bdidn't ask\b|\bonly what i ask",
     "User wants changes limited to what was asked", "User wants changes limited to what was asked"),
    (r"\blinks?\b|链接|連結|リンク", "User prefers links sent directly", "User prefers links sent directly"),
    (r"\bcommit messages?\b|提交信息|提交訊息|コミットメッセージ",
     "User has a convention for commit messages", "User has a convention for commit messages"),
    (r"\btests? first\b|先写测试|先寫測試|テストを先", "User wants tests written before the implementation",
     "User wants tests written before the implementation"),
    (r"\brun (?:the )?tests\b", "User wants tests run before work is reported done",
     "User wants tests run before work is reported done"),
    (r"\bdelet\w*|删除|刪除|削除", "User wants to approve deletions first", "User wants to approve deletions first"),
    (r"\bapologi\w*|道歉|謝ら|謝罪|謝って", "User wants fixes without apologies", "User wants fixes without apologies"),
    (r"\bconfirm\w*|要不要继续|要不要繼續|确认|確認", "User wants to be asked for confirmation",
     "User wants the agent to proceed without asking"),
    (r"\bdestructive\b", "User wants commands shown before risky actions",
     "User wants commands shown before risky actions"),
    (r"\bexplain\w*|\bexplanations?\b|解释|解釋|说明|說明|説明|解説", "User wants more explanation",
     "User wants answers without long explanations"),
    (r"\b(?:short|shorter|brief|concise|terse|too long|verbose|wordy)\b|简短|簡短|简洁|簡潔|短一|短く|短い|太长|太長"
     r"|長すぎ|啰嗦|囉嗦|那么长|那麼長", "User prefers short, concise replies", "User prefers short, concise replies"),
    (r"\bdetail(?:ed|s)?\b|\bin depth\b|详细|詳細|詳しく", "User prefers detailed replies", "User prefers less detail"),
    (r"\bbullet\w*|\blists?\b|\btables?\b|列表|条列|條列|箇条書き|表格", "User prefers bullet-point lists",
     "User prefers prose over lists"),
    (r"\bemojis?\b|表情|絵文字", "User likes emoji in replies", "User wants no emoji in replies"),
    (r"\bcomments?\b|注释|註解|コメント", "User wants more code comments", "User wants code comments only where needed"),
    (r"\bdiffs?\b", "User prefers diffs over whole files", "User prefers diffs over whole files"),
)]
_FILLERS = frozenset("please just kindly really also the a an me my i i'd id you your it it's its this that these "
                     "those so now next time from on going forward future could can would will".split())
_SENTENCE_END = re.compile(r"[.!?;](?:\s|$)")  # not the dot inside an address, a file name or a version
_STOPS = frozenset("in for on at with to of from by when because since and or but then".split())


def _language(text: str) -> str | None:
    for pattern, name in _LANGUAGES:
        m = pattern.search(text)
        if m:
            return name or m.group(1).capitalize()
    return None


def _gist(text: str, start: int, end: int) -> str | None:
    """Up to six plain words of the preference (after its cue, else before it): no capitalised word (a name),
    digit, path or address; stops at a preposition once three words are kept."""
    after = _SENTENCE_END.split(text[end:], maxsplit=1)[0]
    before = _SENTENCE_END.split(text[:start])[-1]
    words: list[str] = []
    for chunk in (after, before):
        words = []
        for i, raw in enumerate(chunk.split()):
            word = raw.strip(",:()\"'")
            low = word.lower()
            if not re.fullmatch(r"[a-z][a-z'-]*", low) or (i > 0 and word[:1].isupper()) or low in _FILLERS:
                continue
            if low in _STOPS and len(words) >= 3:
                break
            if low not in _STOPS:
                words.append(low)
            if len(words) == 6:
                break
        if len(words) >= 2:
            break
    return " ".join(words) if len(words) >= 2 else None


def _preference_summary(text: str, m: re.Match[str]) -> str:
    negative = _NEGATIVE.search(text) is not None
    for pattern, yes, no in _TOPICS:
        if pattern.search(text):
            return no if negative else yes
    lang = _language(text)
    if lang:
        return f"User wants replies in {lang}"
    rest = m.groupdict().get("rest")
    gist = _gist(text, m.start("rest"), m.start("rest")) if rest else _gist(text, m.start(), m.end())
    return redact(f"User prefers: {gist}") if gist else "User stated a preference about how the agent works"


def _preference_match(text: str) -> re.Match[str] | None:
    m = _PREFER.search(text) or _PREFER_CJK.search(text)
    if m is not None and _ABOUT_AGENT.search(m.group("rest")):
        return m
    m = _PREFER_JA.search(text)
    if m is not None and _ABOUT_AGENT.search(m.group("rest")):
        return m
    m = _PREFERENCES.search(text)
    if m is not None:
        return m
    m = _PERSIST_EN.search(text)
    if m is not None and _IMPERATIVE.search(text) and not _FAREWELL.search(text):
        return m
    return _PERSIST_CJK.search(text)


def preference(text: str) -> Hit | None:
    m = _preference_match(text)
    if m is None:
        return None
    if exclamations(text) >= 2 or shouting(text):
        intensity = 5
    elif _PERSIST_EN.search(text) or _PERSIST_CJK.search(text) or _PLEASE_JUST.search(text):
        intensity = 4
    else:
        intensity = 3
    return Hit(_preference_summary(text, m), intensity)


# ------------------------------------------------------------------ emotion

# An English adjective of feeling is the person's own feeling only when they say so ("I'm annoyed", "this is
# so frustrating") or exclaim; "fix the annoying warning" is a task. These cues pass through this gate.
_OWN = r"(?:(?<=i'm )|(?<=i am )|(?<=i feel )|(?<=getting )|(?<=so )|(?<=really )|(?<=very )|(?<=this is )" \
       r"|(?<=that's )|(?<=it's )|(?<=how )|(?<=too )|(?<=super ))"
_NEG_EMOTIONS: list[tuple[re.Pattern[str], str]] = [(_any(p), label) for p, label in (
    (_OWN + r"frustrat\w*|受不了|无语|無語|崩溃|崩潰|服了|醉了|心累|浪费(?:我)?(?:的)?(?:时间|一下午|一整天|一天)"
     r"|浪費(?:我)?(?:的)?(?:時間|一下午|一整個|一天)|^最悪|最悪(?:[、。！!]|だ|です)|ひどい|酷い|いい加減にして|勘弁して",
     "frustrated"),
    (_OWN + r"(?:annoy\w*|irritat\w*)|\bannoyed\b|烦死|煩死|好烦|好煩|真烦|真煩|很烦|很煩|太烦|太煩|烦人|煩人"
     r"|イライラ|いらいら|むかつく|ムカつく|うざい|腹が立", "annoyed"),
    (r"\b(?:angry|furious|pissed|infuriat\w*)\b|气死|氣死|生气|生氣|恼火|惱火|抓狂", "angry"),
    (_OWN + r"disappoint\w*|\bdisappointed\b|失望|がっかり", "disappointed"),
    (r"\b(?:fed up|sick of|tired of|i give up|had enough)\b|うんざり|もう嫌|もういや", "fed up"),
    (r"\b(?:ugh+|argh+|grr+|wtf|ffs|fml)\b|\bwaste of (?:my )?time\b|\bdriving me (?:crazy|nuts|insane)\b"
     r"|\bare you (?:kidding|serious)\b|^seriously\b|\bcome on[!?]|郁闷|鬱悶"
     r"|\b(?:you(?:'re| are)|this is|that's|that is|it's) (?:so |really |just )?(?:useless|terrible|awful"
     r"|horrible|ridiculous|unbelievable)\b", "frustrated"),
)]
_POS_EMOTIONS: list[tuple[re.Pattern[str], str]] = [(_any(p), label) for p, label in (
    (r"\b(?:yay+|woo+hoo+|hooray|yess+)\b|^yes!+|太棒了|太好了|(?:好|很|太|真)(?:开心|開心|高兴|高興|激动|激動|兴奋|興奮)"
     r"|太爽了|やった|嬉しい|うれしい|感動", "excited"),
    (r"\b(?:amazing|awesome|fantastic|incredible)\b", "delighted"),
    (r"\b(?:so|really|very) (?:happy|glad|pleased|excited)\b|\bi(?:'m| am) (?:so |really )?(?:happy|thrilled)\b",
     "happy"),
    (r"\b(?:phew|relief|relieved)\b|松了一口气|鬆了一口氣|ほっと|安心しました", "relieved"),
    (r"\b(?:lol+|lmao|rofl|haha(?:ha)*|hehe+)\b|\bhilarious\b|哈哈|笑死|笑った|笑える|ｗｗ", "amused"),
)]
# cues that count only with an exclamation mark or an emoji ("finally, add a test" is not relief)
_AMPLIFIED_ONLY: list[tuple[re.Pattern[str], str]] = [
    (_any(r"\bfinally\b|终于|終於|ついに"), "relieved"),
    (_any(r"\b(?:thanks|thank you) (?:so|very) much\b|\bthanks a (?:lot|ton)\b"), "satisfied"),
]
_SHOUTED_NEGATIVE = _any(r"[!?]|\b(?:why|still|again|not|stop|broken|wrong|what)\b")
_MILD = _any(r"\b(?:meh|sigh|oh well)\b", r"唉|はぁ")
_INTENSIFIER = _any(r"\b(?:so|really|very|extremely|super|totally|absolutely)\b",
                    r"真的|非常|特别|特別|超|本当に|ほんとに|すごく|めっちゃ|マジで")
_NEG_EMOJI = re.compile("[\U0001f621\U0001f624\U0001f92c\U0001f620\U0001f629\U0001f62b\U0001f61e\U0001f622"
                        "\U0001f62d\U0001f644\U0001f4a2\U0001f612\U0001f926]")
_POS_EMOJI = re.compile("[\U0001f389\U0001f973\U0001f60d\U0001f929\U0001f602\U0001f923]")
_NEGATED_EN = re.compile(r"\b(?:not|never|no longer|hardly|isn't|wasn't|aren't|don't|doesn't|didn't|i'm not"
                         r"|am not)\s+(?:\w+\s+)?$", _I)


def _negated(text: str, m: re.Match[str]) -> bool:
    before, after = text[max(0, m.start() - 24):m.start()], text[m.end():m.end() + 4]
    return bool(_NEGATED_EN.search(before)) or before.endswith(("不", "没", "沒", "別", "别")) \
        or after.startswith(("ない", "ません", "なかった", "しない"))


def _emotion_label(text: str) -> tuple[str, bool, int] | None:
    """(label, negative, base intensity) of the first clear cue."""
    amplified = exclamations(text) > 0 or bool(EMOJI.search(text))
    for table, negative in ((_NEG_EMOTIONS, True), (_POS_EMOTIONS, False)):
        for pattern, label in table:
            m = pattern.search(text)
            if m is not None and not _negated(text, m):
                return label, negative, 3
    for pattern, label in _AMPLIFIED_ONLY:
        if amplified and pattern.search(text):
            return label, False, 3
    if _NEG_EMOJI.search(text) or (shouting(text) and _SHOUTED_NEGATIVE.search(text)):
        return "frustrated", True, 3
    if re.search("[\U0001f602\U0001f923]", text):
        return "amused", False, 3
    if _MILD.search(text):
        return "frustrated", True, 2
    return None


def _trigger(negative: bool, ex: TranscriptExchange, history: Sequence[TranscriptExchange]) -> str:
    if negative:
        recent = [h for h in history[-3:] if correction_kind(clean(h.user), h.agent)]
        if recent or correction_kind(clean(ex.user), ex.agent):
            return " (repeated corrections)" if recent else " (after a mistake by the agent)"
        return " (after the agent's actions)" if ex.agent_tools else (" (in reply to the agent)" if ex.agent else "")
    return " (after the agent's result)" if ex.agent.strip() or ex.agent_tools else ""


def emotion(text: str, ex: TranscriptExchange, history: Sequence[TranscriptExchange] = ()) -> Hit | None:
    found = _emotion_label(text)
    if found is None:
        return None
    label, negative, intensity = found
    intensity += bool(_INTENSIFIER.search(text))
    intensity += exclamations(text) >= 2 or shouting(text)
    intensity += bool((_NEG_EMOJI if negative else _POS_EMOJI).search(text))
    if intensity < 3:
        return None
    return Hit(f"User {label}{_trigger(negative, ex, history)}", min(5, intensity))


# ------------------------------------------------------------------ approval

_APPROVALS: list[tuple[re.Pattern[str], int]] = [(_any(p), level) for p, level in (
    (r"\bexactly what i (?:needed|wanted|asked for|meant|was looking for)\b|正是我(?:要|想要|需要)的"
     r"|就是我要的|まさに(?:これ|それ)", 5),
    (r"^(?:perfect|excellent|brilliant|fantastic|superb|flawless)\b|^exactly\b|\bspot on\b|\bwell done\b"
     r"|\bnailed it\b|(?<!'d )(?<!would )\blove (?:it|this|that)\b(?! if| when)|\bthat'?s (?:perfect|exactly it)\b"
     r"|\b(?:this|that|it)(?:'s| is| was| looks) (?:amazing|awesome|perfect|excellent|brilliant|fantastic)\b"
     r"|^(?:完美|完璧|太好了|太棒了|好极了|好極了|非常好|真棒|漂亮|优秀|優秀|素晴らしい|すばらしい|さすが|お見事|上出来)", 4),
    (r"^(?:great|nice|awesome|amazing|wonderful|lovely|sweet|cool|neat|beautiful)\b"
     r"(?!\s+(?:question|idea|morning|day|weekend|point))"
     r"|\b(?:good|great|nice|excellent) (?:job|work|catch|call|stuff|thinking)\b|\bkudos\b"
     r"|\b(?:that|this|it) (?:works|worked|fixed it|did it|did the trick)\b|\bworks (?:now|perfectly|great"
     r"|like a charm)\b|\blooks (?:good|great|perfect)\b|\blgtm\b|\bship it\b"
     r"|\b(?:much|way|so much) (?:better|clearer|easier to read|nicer)\b|\b(?:this|that|it)(?:'s| is) great\b"
     r"|^(?:很好|不错|不錯|棒|赞|讚|厉害|厲害|没错|沒錯|いいね|良いね|いい感じ|良い感じ|ばっちり|バッチリ|最高)"
     r"|干得好|幹得好|做得好|干得漂亮|幹得漂亮|就是(?:这样|這樣|这个意思|這個意思)|よくできました", 3),
    (r"\b(?:thanks|thank you) (?:so|very) much\b|\bthanks a (?:lot|ton)\b", 3),
    (r"^(?:thanks|thank you|thx|ty|cheers|much appreciated|appreciate it)\b(?! to\b)"
     r"|\bappreciate (?:it|this|that|your)\b|谢谢|謝謝|感谢|感謝|多谢|多謝|辛苦了|ありがとう|助かり|助かった|助かる", 2),
)]
_SHORT_THANKS = _any(r"\b(?:thanks|thank you|thx)\b")
_APPROVAL_EMOJI = re.compile("\U0001f44d|\u2705|\u2764|\U0001f60a|\U0001f389|\U0001f64f|\U0001f44f|\U0001f4af"
                             "|\U0001f64c")
_NOT_APPROVAL = _any(
    r"\b(?:not|isn't|wasn't|aren't|hardly|never)\s+(?:\w+\s+){0,2}(?:good|great|perfect|nice|right|what i|works?"
    r"|working|ideal|helpful)\b|\bnot really\b|^no,? thank|\bdoesn't work\b|\bdidn't work\b",
    r"\b(?:broken|breaks|fail\w*|crash\w*|still|wrong|bug|error|but|however|though|although|except"
    r"|unfortunately)\b",
    r"不(?:太|是很|怎么|怎麼|够|夠|是太)?(?:好|完美|行)(?!了)|^(?:不用|不必|不需要)|但是|可是|不过|不過|还是|還是|仍然|错误|錯誤"
    r"|失败|失敗|(?:良く|よく)ない|いまいち|微妙|あまり|でも|けど|しかし|まだ|エラー|壊れ")


def approval(text: str, ex: TranscriptExchange) -> Hit | None:
    if _NOT_APPROVAL.search(text):
        return None
    level = 0
    for pattern, value in _APPROVALS:
        m = pattern.search(text)
        if m is not None and not _in_question(text, m.start()):
            level = max(level, value)
    if not level and len(text.split()) <= 6 and _SHORT_THANKS.search(text) and "?" not in text:
        level = 2
    if not level and _APPROVAL_EMOJI.search(text) and not _in_question(text, 0):
        level = 2
    if not level:
        return None
    if level < 5 and _INTENSIFIER.search(text) and level >= 3:
        level += 1
    return Hit(_approval_summary(level, ex), level)


def _approval_summary(level: int, ex: TranscriptExchange) -> str:
    what = "praised" if level >= 3 else "thanked the agent for"
    agent = ex.agent
    if re.search(r"^\s*(?:[-*•]|\d+[.)])\s", agent, re.M):
        return f"User {what} a list-style reply"
    if "```" in agent:
        return f"User {what} the agent's code"
    if ex.agent_tools:
        return f"User {what} the agent's completed work"
    return f"User {what} the agent's reply" if agent.strip() else "User expressed approval"


# ------------------------------------------------------------------ style (patterns over messages)

_FORMAL = _any(r"\b(?:could you please|would you (?:please|kindly)|kindly|i would (?:appreciate|be grateful)"
               r"|please let me know|best regards|kind regards|thank you in advance)\b",
               r"您|劳驾|勞駕|烦请|煩請|敬请|敬請",
               r"いただけますでしょうか|いただけますと幸い|恐れ入りますが|お手数ですが|ございます|いたします|致します")
_WINDOW, _NEEDED = 5, 4


def _short(message: str) -> bool:
    text = clean(message)
    return bool(text) and "\n" not in message.strip() and len(text) <= (8 if is_cjk(text) else 24)


def _long(message: str) -> bool:
    text = clean(message)
    return len(text) >= (150 if is_cjk(text) else 350)


def _became(users: Sequence[str], test: Callable[[str], object]) -> bool:
    """Whether ``test`` holds for 4 of the last 5 messages, the newest included, and did not one message
    earlier (a pattern is reported once, when it forms)."""
    now = [bool(test(m)) for m in users[-_WINDOW:]]
    before = [bool(test(m)) for m in users[-_WINDOW - 1:-1]]
    return now[-1] and sum(now) >= _NEEDED and sum(before) < _NEEDED


def style(users: Sequence[str], agents: Sequence[str]) -> Hit | None:
    """A communication pattern of the session that formed with the newest message (``users`` and ``agents``:
    the session's user messages and the agent turns before them, oldest first)."""
    if len(users) >= _NEEDED and all(_short(m) for m in users[-_NEEDED:]) \
            and (len(users) == _NEEDED or not _short(users[-_NEEDED - 1])):
        return Hit(f"User sent {_NEEDED} short messages in a row (prefers brevity)", 3)
    if _became(users, lambda m: EMOJI.search(m)):
        if any(EMOJI.search(a) for a in agents[-_WINDOW:]):
            return Hit("User mirrors the agent's emoji use (comfortable with emoji)", 3)
        return Hit("User uses emoji often (a casual tone is welcome)", 3)
    if _became(users, lambda m: _FORMAL.search(m)):
        return Hit("User writes formally (prefers a professional tone)", 3)
    if _became(users, _long):
        return Hit("User writes long, detailed messages (welcomes thorough replies)", 3)
    return None


# ------------------------------------------------------------------ context


def agent_context(ex: TranscriptExchange) -> str | None:
    """What the agent's turn was like, never what it said: size, code, list, question, tools used."""
    text = ex.agent.strip()
    tools = list(dict.fromkeys(re.sub(r"[^A-Za-z0-9_.-]", "", t)[:30] for t in ex.agent_tools if t))
    if not text and not tools:
        return None
    parts: list[str] = []
    if text:
        size = f"~{len(text)} characters" if is_cjk(text) else f"~{len(text.split())} words"
        kind = "long reply" if len(text) > 600 else "short reply" if len(text) < 120 else "reply"
        extras = [label for label, hit in (("with code", "```" in text),
                                           ("as a list", re.search(r"^\s*(?:[-*•]|\d+[.)])\s", text, re.M)),
                                           ("ending in a question", _asks(text))) if hit]
        parts.append(f"Agent {kind} ({size})" + (" " + ", ".join(extras) if extras else ""))
    if tools:
        parts.append("agent used " + ", ".join(tools[:3]) + (f" (+{len(tools) - 3})" if len(tools) > 3 else ""))
    return redact("; ".join(parts))[:150]
