"""rjieba (the [fast] extra) must cut Han text exactly as jieba does with HMM off, so fingerprints
are bit-identical whichever is installed. Skipped when rjieba is not installed."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simhash_sqlite.core import features
from simhash_sqlite.core.features import cut_han, words
from simhash_sqlite.core.fingerprint import simhash
from simhash_sqlite.core.settings import FingerprintSettings

pytest.importorskip("rjieba")

# Common characters plus rarer ones, so both dictionary words and unknown runs are cut.
HAN = (
    "的一是在不了有和人这中大为上个国我以要他时来用们生到作地于出就分对成会可主发年动同工也能下过子说产种面而方后多"
    "定行学法所民得经十三之进着等部度家电力里如水化高自二理起小物现实加量都两体制机当使点从业本去把性好应开它合还因"
    "由其些然前外天政四日那社义事平形相全表间样与关各重新线内数正心反你明看原又么利比或但质气第向道命此变条只没结解"
    "问意建月公无系军很情者最立代想已通并提直题党程展五果料象员革位入常文总次品式活设及管特件长求老头基资边流路级少"
    "图山统接知较将组见计别她手角期根论运农指几九区强放决西被干做必战先回则任取据处队南给色光门即保治北造百规热领七"
    "海口东导器压志世金增争济阶油思术极交受联什认六共权收证改清己美再采转更单风切打白教速花带安场身车例真务具万每目"
    "至达走积示议声报斗完类八离华名确才科张信马节话米整空元况今集温传土许步群广石记需段研界拉林律叫且究观越织装影算"
    "低持音众书布复容儿须际商非验连断深难近矿千周委素技备半办青省列习响约支般史感劳便团往酸历市克何除消构府称太准精"
    "值号率族维划选标写存候毛亲快效斯院查江型眼王按格养易置派层片始却专状育厂京识适属圆包火住调满县局照参红细引听该"
    "铁价严龘靐齉䶮鿏㐀"
)

SENTENCES = [
    "SimHash 是一种局部敏感哈希算法，常用于海量网页去重。",
    "结巴中文分词：做最好的 Python 中文分词组件。我来到北京清华大学。",
    "他来到了网易杭研大厦，小明硕士毕业于中国科学院计算所，后在日本京都大学深造。",
]


@given(st.text(alphabet=HAN, min_size=1, max_size=40))
@settings(max_examples=300, deadline=None)
def test_rjieba_cuts_han_runs_exactly_like_jieba(run):
    assert cut_han(run, hmm=False, fast=True) == cut_han(run, hmm=False, fast=False)


@pytest.mark.parametrize("text", SENTENCES)
def test_words_and_fingerprints_are_identical_with_and_without_rjieba(text, monkeypatch):
    assert words(text, fast=True) == words(text, fast=False)
    s = FingerprintSettings(features="words", ngram=2)
    with_rjieba = simhash(text, s)
    monkeypatch.setattr(features, "_rjieba", lambda: None)  # as if the [fast] extra were not installed
    assert simhash(text, s) == with_rjieba


def test_hmm_on_always_uses_jieba():
    text = SENTENCES[2]
    assert words(text, hmm=True, fast=True) == words(text, hmm=True, fast=False)
