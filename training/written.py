"""Texts the project writes itself: Indonesian (no permissive human-labelled set exists) and the
English categories the public sets lack (threats, sexual harassment, emoji, benign counterparts).

In the style of HateCheck's functionalities (Röttger et al. 2021, CC BY 4.0; its cases are not
copied: HateCheck stays an outside test set): each category of abuse has templates, and each has
benign counterparts that share its words (negation, counter-speech, quotes and reports, literal
animals, words that contain a term, identity groups named neutrally, everyday chat). Slots are
filled from the curated Indonesian term lists (training/data/id_terms.json, training/terms.py)
and word lists written here; each filled text may be rewritten in informal or "alay" spelling
(gue/lu, gak, yg, bgt, dropped vowels, stretched letters).

Every row's group is its template's id, so a split by group holds out whole templates: a held-out
figure measures templates the model never saw, not siblings of training rows. Deterministic:
the same code gives the same rows.
"""

from __future__ import annotations

import random
import re

from training.labels import Row
from training.terms import load as load_terms

SEED = 47
FILLS = {"id": 60, "en": 25}  # filled texts per template, at most

# --- Indonesian ------------------------------------------------------------------------------

ID_CORE_INSULTS = ["bodoh", "tolol", "goblok", "bego", "idiot", "dungu", "bangsat", "bajingan", "brengsek",
                   "keparat", "kampret", "sialan", "anjing", "babi", "monyet", "tai", "bedebah", "sinting",
                   "geblek", "dongo", "pekok", "bloon", "kunyuk", "sontoloyo", "pecundang", "sampah"]
ID_ALAY = {"goblok": ["gblk", "goblog", "gobl0k"], "tolol": ["tlol", "tolool", "t0lol"], "bangsat": ["bgst", "bangsad", "bngst"],
           "anjing": ["anjg", "anjir", "njing", "anjink", "anying"], "bajingan": ["bjingan", "bajigur"],
           "kampret": ["kmprt", "kampred"], "bodoh": ["bdh", "bodo"], "bego": ["begok", "bgo"], "babi": ["b4bi", "babik"],
           "brengsek": ["brngsk", "brengsk"], "kontol": ["kntl", "kontl"], "ngentot": ["ngntt", "ngentod"],
           "tai": ["taik", "tahi"], "monyet": ["monyed", "mnyt"]}
ID_ADJ_INSULTS = ["bodoh", "tolol", "goblok", "bego", "dungu", "idiot", "sinting", "bloon", "geblek"]
ID_YOU = ["kamu", "kau", "lu", "lo", "elo", "loe", "km", "ente", "situ"]
ID_NAMES = ["Budi", "Siti", "Andi", "Rina", "Dewi", "Agus", "Putri", "Joko", "Rudi", "Ayu", "Bayu", "Fitri", "Wahyu",
            "Nadia", "Yanto", "Sri"]
ID_ANIMALS = ["anjing", "babi", "monyet", "kampret", "kunyuk", "celeng", "asu", "kecoak", "tikus", "keledai"]
ID_THREAT = [("bunuh", "kubunuh"), ("tusuk", "kutusuk"), ("bacok", "kubacok"), ("tembak", "kutembak"),
             ("hajar", "kuhajar"), ("pukul", "kupukul"), ("habisi", "kuhabisi"), ("cekik", "kucekik"),
             ("gorok", "kugorok"), ("gebukin", "kugebukin"), ("tikam", "kutikam"), ("injak", "kuinjak")]
ID_GROUPS = ["orang Cina", "orang Tionghoa", "orang Papua", "orang Batak", "orang Madura", "orang Jawa",
             "orang Kristen", "umat Kristen", "orang Islam", "umat Muslim", "umat Hindu", "orang Yahudi",
             "kaum gay", "orang LGBT", "waria", "perempuan", "kaum perempuan", "orang cacat", "penyandang disabilitas",
             "imigran", "orang Arab", "jemaat Ahmadiyah", "orang Syiah", "orang Sunda", "orang Ambon", "orang kulit hitam",
             "orang Buddha", "pengungsi Rohingya", "orang Minang", "orang Bugis"]
ID_DEHUM = ["sampah", "binatang", "kecoak", "parasit", "penyakit", "tikus", "virus", "hama", "kotoran", "setan"]
ID_NEG_ATTR = ["menjijikkan", "kotor", "bau", "malas", "pembohong", "penipu", "bodoh", "tolol", "rakus", "licik",
               "jahat", "tidak tahu diri", "kampungan", "biadab", "pengkhianat", "tukang onar"]
ID_DISGUST = ["jijik", "muak", "mual", "eneg", "benci"]
ID_POS_ATTR = ["ramah", "baik hati", "pintar", "pekerja keras", "jujur", "hebat", "sopan", "kreatif", "rajin",
               "murah senyum"]
ID_SEX_VERBS = ["ngewe", "ngentot", "ngeseks", "begituan", "tidur", "ngamar"]
ID_SEX_NOUNS = ["memek", "toket", "pantat", "kontol", "susu", "bokong", "paha"]
ID_SEX_INSULTS = ["lonte", "pelacur", "perek", "jablay", "bispak", "sundel", "pecun", "jalang", "cabe-cabean"]
ID_PROFANITY = ["anjing", "anjir", "bangsat", "tai", "sialan", "kampret", "asu", "jancok", "jancuk", "cuk", "anjay",
                "babi", "monyet", "shit", "taek", "buset anjing"]
ID_ANIMALS_LITERAL = ["anjing", "kucing", "babi", "monyet", "kambing", "ayam", "kampret", "tikus", "celeng", "kelinci"]

# (template id, positive categories, functionality, pattern)
ID_TEMPLATES = [
    # insult: insults at a person
    ("id-ins-01", ("insult",), "insult", "dasar {insult}"),
    ("id-ins-02", ("insult",), "insult", "{you} {adj} banget sih"),
    ("id-ins-03", ("insult",), "insult", "{you} itu {insult}, tahu nggak"),
    ("id-ins-04", ("insult",), "insult", "{insult} {you}, diem aja deh"),
    ("id-ins-05", ("insult",), "insult", "otak {you} kayak {animal}"),
    ("id-ins-06", ("insult",), "insult", "muka {you} mirip {animal}"),
    ("id-ins-07", ("insult",), "insult", "{name} memang {insult}, nggak ada gunanya"),
    ("id-ins-08", ("insult",), "insult", "dasar {insult} tidak berguna"),
    ("id-ins-09", ("insult",), "insult", "heh {insult}, pergi sana"),
    ("id-ins-10", ("insult",), "insult", "komentar {you} {adj} sekali, mikir dulu"),
    ("id-ins-11", ("insult",), "insult", "{you} {animal}"),
    ("id-ins-12", ("insult",), "insult", "mulut {you} bau kayak {dehum}"),
    ("id-ins-13", ("insult",), "insult", "{you} cuma {insult} yang sok pintar"),
    ("id-ins-14", ("insult",), "insult", "orang {adj} kayak {you} mending diam"),
    ("id-ins-15", ("insult",), "insult", "{insult}!! {you} ngapain sih"),
    ("id-ins-16", ("insult",), "insult", "admin {insult}, kerja yang benar"),
    ("id-ins-17", ("insult",), "insult", "pemain {adj}, main bola aja nggak becus"),
    ("id-ins-18", ("insult",), "insult", "dasar anak {insult}"),
    ("id-ins-19", ("insult",), "insult", "{you} sampah masyarakat"),
    ("id-ins-20", ("insult",), "insult", "jelek banget {you}, kayak {animal}"),
    ("id-ins-21", ("insult",), "insult", "{regional} {you}"),
    ("id-ins-22", ("insult",), "insult", "dasar {regional}, pulang sana"),
    ("id-ins-23", ("insult",), "insult", "pejabat {insult} semua, makan uang rakyat"),
    ("id-ins-24", ("insult",), "insult", "{you} 🖕"),
    # threat: threats
    ("id-thr-01", ("threat",), "threat", "aku akan {tv} {you}"),
    ("id-thr-02", ("threat",), "threat", "{tvk} {you} nanti malam"),
    ("id-thr-03", ("threat",), "threat", "awas {you}, besok gue {tv}"),
    ("id-thr-04", ("threat",), "threat", "tunggu aja, {you} bakal mati di tanganku"),
    ("id-thr-05", ("threat",), "threat", "rumah {you} akan kubakar"),
    ("id-thr-06", ("threat",), "threat", "{name} pantas dibunuh"),
    ("id-thr-07", ("threat",), "threat", "gue tau rumah {you}, siap-siap aja gue {tv}"),
    ("id-thr-08", ("threat",), "threat", "kalau ketemu, {you} gue {tv} sampai mampus"),
    ("id-thr-09", ("threat",), "threat", "akan kupatahkan leher {you}"),
    ("id-thr-10", ("threat",), "threat", "bunuh saja {name} dan keluarganya"),
    ("id-thr-11", ("threat",), "threat", "sekali lagi ngomong, kepala {you} kupecahkan"),
    ("id-thr-12", ("threat",), "threat", "gue bawa parang ke rumah {you} malam ini"),
    ("id-thr-13", ("threat",), "threat", "siap-siap {you} mati besok"),
    ("id-thr-14", ("threat",), "threat", "mau {tvk} {you}?"),
    ("id-thr-15", ("threat",), "threat", "{you} harus di{tv} rame-rame"),
    ("id-thr-16", ("threat", "insult"), "threat", "{insult}, gue {tv} {you} sampai mampus"),
    ("id-thr-17", ("threat",), "threat", "🔪🔪 tunggu gue di depan rumah {you}"),
    ("id-thr-18", ("threat",), "threat", "{you} akan kubunuh kalau berani datang"),
    ("id-thr-19", ("threat",), "threat", "gue {tv} lu sampai mati"),
    ("id-thr-20", ("threat",), "threat", "nyawa {you} nggak akan lama lagi"),
    ("id-thr-21", ("threat",), "threat", "keluarga {you} akan kuhabisi satu per satu"),
    ("id-thr-22", ("threat",), "threat", "besok {you} tinggal nama"),
    ("id-thr-23", ("threat",), "threat", "{tvk} {you} kalau ketemu di jalan"),
    # hate: identity attacks
    ("id-hat-01", ("hate",), "identity", "{group} itu {dehum}"),
    ("id-hat-02", ("hate",), "identity", "semua {group} harus diusir dari Indonesia"),
    ("id-hat-03", ("hate",), "identity", "{group} tidak pantas hidup di negeri ini"),
    ("id-hat-04", ("hate",), "identity", "aku benci semua {group}"),
    ("id-hat-05", ("hate", "insult"), "identity", "{group} semuanya {adj}"),
    ("id-hat-06", ("hate", "threat"), "identity", "basmi {group} sampai habis"),
    ("id-hat-07", ("hate",), "identity", "jangan pernah percaya {group}, mereka semua penipu"),
    ("id-hat-08", ("hate",), "identity", "{group} lebih rendah dari binatang"),
    ("id-hat-09", ("hate",), "identity", "negara ini lebih baik tanpa {group}"),
    ("id-hat-10", ("hate",), "identity", "{group} itu penyakit bangsa"),
    ("id-hat-11", ("hate", "insult"), "identity", "dasar {group} {insult}"),
    ("id-hat-12", ("hate",), "identity", "{group} tidak boleh jadi pemimpin, otaknya kosong semua"),
    ("id-hat-13", ("hate", "threat"), "identity", "bakar saja rumah ibadah {group}"),
    ("id-hat-14", ("hate",), "identity", "{group} najis, jangan dekat-dekat"),
    ("id-hat-15", ("hate",), "identity", "usir {group} dari kampung kita"),
    ("id-hat-16", ("hate",), "identity", "{group} cuma bikin rusak negara"),
    ("id-hat-17", ("hate",), "identity", "{group} emang {negattr}"),
    ("id-hat-18", ("hate",), "identity", "gue benci banget sama {group}"),
    ("id-hat-19", ("hate",), "identity", "{group} bikin gue {disgust}"),
    ("id-hat-20", ("hate", "insult"), "identity", "cuma {group} yang bisa se{adj} itu"),
    ("id-hat-21", ("hate",), "identity", "menurut gue {group} itu {dehum}"),
    ("id-hat-22", ("hate",), "identity", "kalian cuma {group}, gak ada harganya"),
    ("id-hat-23", ("hate",), "identity", "pantas aja {negattr}, dia kan {group}"),
    ("id-hat-24", ("hate",), "identity", "gak ada tempat buat {group} di negara ini"),
    ("id-hat-25", ("hate", "threat"), "identity", "{group} mending mati aja semua"),
    ("id-hat-26", ("hate",), "identity", "hidup {group} gak ada gunanya"),
    ("id-hat-27", ("hate",), "identity", "aku jijik lihat {group}"),
    ("id-hat-28", ("hate",), "identity", "{group} tuh {dehum} semua"),
    ("id-hat-29", ("hate",), "identity", "kenapa sih {group} selalu {negattr}?"),
    ("id-hat-30", ("hate",), "identity", "jangan kasih kerjaan ke {group}, mereka {negattr}"),
    ("id-hat-31", ("hate", "threat"), "identity", "kita harus serang {group} sampai mereka pergi"),
    ("id-hat-32", ("hate",), "identity", "{group} gak pantas disebut manusia"),
    # sexual
    ("id-sex-01", ("sexual",), "sexual", "kirim foto bugil {you} dong"),
    ("id-sex-02", ("sexual",), "sexual", "mau {sexverb} sama {you}"),
    ("id-sex-03", ("sexual",), "sexual", "ayo {sexverb} malam ini, {you} pasti suka"),
    ("id-sex-04", ("sexual",), "sexual", "{sexnoun} {you} pasti enak"),
    ("id-sex-05", ("sexual",), "sexual", "tunjukin {sexnoun} {you} dong"),
    ("id-sex-06", ("sexual", "insult"), "sexual", "dasar {sexinsult}"),
    ("id-sex-07", ("sexual", "insult"), "sexual", "berapa tarif {you} semalam, {sexinsult}?"),
    ("id-sex-08", ("sexual",), "sexual", "aku pengen liat {you} telanjang"),
    ("id-sex-09", ("sexual", "insult"), "sexual", "{you} cuma {sexinsult} murahan"),
    ("id-sex-10", ("sexual",), "sexual", "pengen remas {sexnoun} {you}"),
    ("id-sex-11", ("sexual",), "sexual", "{sexterm} {you}"),
    ("id-sex-12", ("sexual",), "sexual", "video {sexverb} {name} udah nyebar, mau link?"),
    ("id-sex-13", ("sexual",), "sexual", "sini duduk di pangkuan om, {sexnoun} {you} bagus"),
    ("id-sex-14", ("sexual",), "sexual", "{you} mau nggak {sexverb} sama aku"),
    ("id-sex-15", ("sexual",), "sexual", "{sexnoun} {you} gede banget, pengen pegang"),
    ("id-sex-16", ("sexual",), "sexual", "kapan kita {sexverb}, sayang"),
    ("id-sex-17", ("sexual",), "sexual", "kirim video {sexnoun} {you} dong"),
    ("id-sex-18", ("sexual",), "sexual", "aku pengen {sexverb} sama {name}"),
    ("id-sex-19", ("sexual", "insult"), "sexual", "{name} itu {sexinsult}, bisa dipakai siapa aja"),
    ("id-sex-20", ("sexual",), "sexual", "ayo open BO, {sexverb} sampai pagi"),
    # profanity: swearing at no one
    ("id-pro-01", ("profanity",), "profanity", "{prof}! macet lagi"),
    ("id-pro-02", ("profanity",), "profanity", "{prof}, hujan terus dari pagi"),
    ("id-pro-03", ("profanity",), "profanity", "{prof} lah, kalah lagi timnya"),
    ("id-pro-04", ("profanity",), "profanity", "wah {prof}, sinyalnya jelek banget"),
    ("id-pro-05", ("profanity",), "profanity", "{prof}, aku lupa bawa dompet"),
    ("id-pro-06", ("profanity",), "profanity", "{prof} {prof}, telat lagi"),
    ("id-pro-07", ("profanity",), "profanity", "harganya mahal banget, {prof}"),
    ("id-pro-08", ("profanity",), "profanity", "{prof}, capek banget hari ini"),
    ("id-pro-09", ("profanity",), "profanity", "{prof}!!!"),
    ("id-pro-10", ("profanity",), "profanity", "{prof} emang, server down terus"),
    # benign counterparts
    ("id-neg-01", (), "negation", "{you} bukan orang {adj}, {you} pintar kok"),
    ("id-neg-02", (), "negation", "aku tidak akan pernah menyakiti {you}"),
    ("id-neg-03", (), "negation", "{name} sama sekali tidak {adj}"),
    ("id-neg-04", (), "negation", "tidak ada yang bilang {you} {adj}"),
    ("id-neg-05", (), "negation", "aku nggak bakal {tv} siapa pun, tenang saja"),
    ("id-neg-06", (), "negation", "{group} bukan {dehum}, mereka manusia seperti kita"),
    ("id-neg-07", (), "negation", "jangan merasa {adj}, semua orang bisa belajar"),
    ("id-ctr-01", (), "counter", "berhenti panggil orang {insult}, itu tidak sopan"),
    ("id-ctr-02", (), "counter", "bilang {group} itu {dehum} adalah rasis dan salah"),
    ("id-ctr-03", (), "counter", "ancaman di kolom komentar harus dilaporkan ke polisi"),
    ("id-ctr-04", (), "counter", "kata '{insult}' itu kasar, jangan dipakai ke teman"),
    ("id-ctr-05", (), "counter", "kita harus melindungi {group} dari kebencian"),
    ("id-ctr-06", (), "counter", "jangan menghina {group}, kita semua saudara"),
    ("id-ctr-07", (), "counter", "menyebut {group} sebagai {dehum} itu ujaran kebencian"),
    ("id-quo-01", (), "quote", "dia bilang '{insult}' ke aku, aku sedih banget"),
    ("id-quo-02", (), "quote", "pelaku mengancam akan mem{tv} korban sebelum ditangkap polisi"),
    ("id-quo-03", (), "quote", "guru melarang murid mengucapkan kata kasar seperti '{insult}'"),
    ("id-quo-04", (), "quote", "polisi menangkap pria yang menyebar ancaman terhadap {group}"),
    ("id-lit-01", (), "literal", "{animal_lit} saya suka main di taman"),
    ("id-lit-02", (), "literal", "{animal_lit} tetangga berisik semalaman"),
    ("id-lit-03", (), "literal", "di kebun binatang ada {animal_lit} yang lucu sekali"),
    ("id-lit-04", (), "literal", "peternak itu memelihara {animal_lit} di belakang rumah"),
    ("id-lit-05", (), "literal", "buang sampah pada tempatnya ya"),
    ("id-lit-06", (), "literal", "{tv} nyamuk itu sebelum menggigit"),
    ("id-lit-07", (), "literal", "aku mau bunuh waktu sambil main game"),
    ("id-lit-08", (), "literal", "film aksi itu penuh adegan tembak-tembakan"),
    ("id-lit-09", (), "literal", "pendidikan seks penting untuk remaja"),
    ("id-sub-01", (), "contains", "kami membahas {whitelist} di rapat tadi"),
    ("id-sub-02", (), "contains", "{whitelist} itu penting untuk kita semua"),
    ("id-sub-03", (), "contains", "hari ini kita bicara soal {whitelist}"),
    ("id-grp-01", (), "identity-neutral", "{group} merayakan hari raya dengan meriah"),
    ("id-grp-02", (), "identity-neutral", "saya punya banyak teman {group}"),
    ("id-grp-03", (), "identity-neutral", "{group} adalah bagian dari bangsa Indonesia"),
    ("id-grp-04", (), "identity-neutral", "tetangga saya {group}, orangnya baik sekali"),
    ("id-grp-05", (), "identity-neutral", "acara budaya {group} ramai dikunjungi"),
    ("id-grp-06", (), "identity-neutral", "hak {group} dilindungi undang-undang"),
    ("id-grp-07", (), "identity-neutral", "saya bangga jadi bagian dari {group}"),
    ("id-grp-08", (), "identity-positive", "{group} itu {posattr}"),
    ("id-grp-09", (), "identity-positive", "aku sayang sama teman-teman {group}"),
    ("id-grp-10", (), "identity-positive", "menurut gue {group} {posattr} banget"),
    ("id-grp-11", (), "identity-positive", "banyak {group} yang {posattr}"),
    ("id-grp-12", (), "identity-neutral", "apa kabar teman-teman {group}?"),
    ("id-grp-13", (), "identity-neutral", "dia kan {group}, makanya jago masak"),
    ("id-pos-01", (), "praise", "{you} keren banget, makasih ya"),
    ("id-pos-02", (), "praise", "mantap {name}, videonya bagus"),
    ("id-pos-03", (), "praise", "{you} pintar sekali, semoga sukses"),
    ("id-pos-04", (), "praise", "terima kasih {name}, {you} baik banget"),
    ("id-emo-01", ("insult", "profanity"), "emoji", "{finger} {you}"),
    ("id-emo-02", ("insult",), "emoji", "dasar {insult} {finger}"),
    ("id-emo-03", (), "emoji", "{happy} makasih {you}"),
]

# A second round of templates (training/RESULTS.md, "more frames"): the first round's held-out
# templates showed that a frame seen in no other template is a frame the model cannot read
# (threats 37% found, identity attacks 50%). More frames per category, each drawing its abusive
# words from the slots, and benign frames that share those words.
ID_TEMPLATES += [
    # insult
    ("id-ins-25", ("insult",), "insult", "{you} tuh {insult} banget ya, gak pernah mikir"),
    ("id-ins-26", ("insult",), "insult", "udah {adj}, sok tau lagi"),
    ("id-ins-27", ("insult",), "insult", "pantesan {you} gak punya temen, {insult} sih"),
    ("id-ins-28", ("insult",), "insult", "{name} {insult}, dari dulu gak berubah"),
    ("id-ins-29", ("insult",), "insult", "mikir pake otak dong {insult}"),
    ("id-ins-30", ("insult",), "insult", "gak usah komen kalau {adj}, {insult}"),
    ("id-ins-31", ("insult",), "insult", "emang dasar {insult}, diajarin berkali-kali gak ngerti"),
    ("id-ins-32", ("insult",), "insult", "{you} itu {animal} berkedok manusia"),
    ("id-ins-33", ("insult",), "insult", "ngaca dulu {you}, muka kayak {animal} aja belagu"),
    ("id-ins-34", ("insult",), "insult", "orang tua {you} pasti malu punya anak {adj} kayak gitu"),
    ("id-ins-35", ("insult",), "insult", "semua yang {you} tulis sampah, dasar {insult}"),
    ("id-ins-36", ("insult",), "insult", "wasit {insult}, buta ya matanya"),
    # threat
    ("id-thr-24", ("threat",), "threat", "jangan sampai gue ketemu {you}, langsung gue {tv}"),
    ("id-thr-25", ("threat",), "threat", "aku bersumpah akan {tv} {you}"),
    ("id-thr-26", ("threat",), "threat", "gue cari {you} sampai ketemu terus gue {tv}"),
    ("id-thr-27", ("threat",), "threat", "hati-hati kalau pulang malam, {you} bisa gue {tv}"),
    ("id-thr-28", ("threat",), "threat", "{name} harus di{tv} secepatnya"),
    ("id-thr-29", ("threat",), "threat", "siapa pun yang bela {name} akan gue {tv}"),
    ("id-thr-30", ("threat",), "threat", "kalau berani, datang sini biar gue {tv}"),
    ("id-thr-31", ("threat",), "threat", "gue kirim orang buat {tv} {you}"),
    ("id-thr-32", ("threat",), "threat", "{tvk} {you} nanti, lihat saja"),
    ("id-thr-33", ("threat",), "threat", "{you} bakal pulang tinggal nama kalau masih di sini"),
    ("id-thr-34", ("threat",), "threat", "gue pastikan {you} masuk rumah sakit besok"),
    ("id-thr-35", ("threat",), "threat", "bakal gue {tv} {you} di depan keluarga {you}"),
    ("id-thr-36", ("threat",), "threat", "ingat ya, nyawa {you} ada di tangan gue"),
    ("id-thr-37", ("threat",), "threat", "besok {you} nggak bakal bangun lagi"),
    ("id-thr-38", ("threat",), "threat", "sekali lagi {you} lewat sini, gue {tv}"),
    ("id-thr-39", ("threat",), "threat", "{you} mau mati ya? sini gue {tv}"),
    ("id-thr-40", ("threat",), "threat", "darah {you} bakal tumpah di jalan"),
    ("id-thr-41", ("threat",), "threat", "tunggu pembalasan gue, {you} akan gue {tv}"),
    ("id-thr-42", ("threat", "insult"), "threat", "dasar {insult}, tunggu aja gue {tv} {you}"),
    ("id-thr-43", ("threat",), "threat", "anak {you} yang gue {tv} duluan"),
    ("id-thr-44", ("threat",), "threat", "orang kayak {name} pantas di{tv} rame-rame"),
    ("id-thr-45", ("threat",), "threat", "{tvk} kau sampai tidak bisa jalan"),
    # identity attacks
    ("id-hat-33", ("hate",), "identity", "{group} itu sumber masalah di negeri ini"),
    ("id-hat-34", ("hate",), "identity", "jangan mau bertetangga sama {group}, mereka {negattr}"),
    ("id-hat-35", ("hate",), "identity", "{group} harus dikeluarkan dari sekolah kita"),
    ("id-hat-36", ("hate",), "identity", "{group} gak usah dikasih hak apa-apa"),
    ("id-hat-37", ("hate",), "identity", "dasar {group}, kerjaannya cuma bikin onar"),
    ("id-hat-38", ("hate",), "identity", "pokoknya {group} itu {negattr} semua"),
    ("id-hat-39", ("hate",), "identity", "{group} sama aja kayak {dehum}"),
    ("id-hat-40", ("hate",), "identity", "tolak {group} masuk kampung kita"),
    ("id-hat-41", ("hate",), "identity", "{group} tidak layak tinggal di sini"),
    ("id-hat-42", ("hate", "threat"), "identity", "{group} harus di{tv} semua"),
    ("id-hat-43", ("hate",), "identity", "gue gak sudi satu kantor sama {group}"),
    ("id-hat-44", ("hate",), "identity", "jangan pilih pemimpin {group}, mereka {negattr}"),
    ("id-hat-45", ("hate",), "identity", "{group} itu aib bangsa"),
    ("id-hat-46", ("hate",), "identity", "dunia lebih baik kalau {group} lenyap"),
    ("id-hat-47", ("hate",), "identity", "makin banyak {group}, makin hancur negeri ini"),
    ("id-hat-48", ("hate",), "identity", "{group} harusnya dikurung saja"),
    # sexual
    ("id-sex-21", ("sexual",), "sexual", "{you} cantik, mau dong {sexverb} bareng"),
    ("id-sex-22", ("sexual",), "sexual", "pap {sexnoun} dong {you}"),
    ("id-sex-23", ("sexual",), "sexual", "lagi sange nih, {you} mau {sexverb}?"),
    ("id-sex-24", ("sexual",), "sexual", "open VCS, bisa lihat {sexnoun} aku"),
    ("id-sex-25", ("sexual",), "sexual", "pengen jilat {sexnoun} {you}"),
    ("id-sex-26", ("sexual",), "sexual", "{name} pasti enak di{sexverb}"),
    ("id-sex-27", ("sexual",), "sexual", "tarif {you} berapa sejam?"),
    ("id-sex-28", ("sexual",), "sexual", "dm aku kalau mau liat {sexnoun} gratis"),
    ("id-sex-29", ("sexual", "insult"), "sexual", "{sexinsult} kayak {you} pasti sering {sexverb}"),
    ("id-sex-30", ("sexual",), "sexual", "{you} udah pernah {sexverb} belum?"),
    ("id-sex-31", ("sexual",), "sexual", "bajunya ketat, {sexnoun}nya kelihatan"),
    ("id-sex-32", ("sexual",), "sexual", "malam ini {sexverb} di hotel yuk"),
    # profanity: swearing at no one
    ("id-pro-11", ("profanity",), "profanity", "{prof}, laptopnya mati pas lagi kerja"),
    ("id-pro-12", ("profanity",), "profanity", "asli {prof}, gak nyangka endingnya gitu"),
    ("id-pro-13", ("profanity",), "profanity", "{prof} banget hari ini, semuanya berantakan"),
    ("id-pro-14", ("profanity",), "profanity", "ya {prof}, ketinggalan kereta"),
    ("id-pro-15", ("profanity",), "profanity", "{prof} kenceng banget hujannya"),
    ("id-pro-16", ("profanity",), "profanity", "gila {prof}, mahal amat"),
    ("id-pro-17", ("profanity",), "profanity", "{prof} gue kebangun kesiangan"),
    # benign counterparts that share those words
    ("id-neg-08", (), "negation", "aku nggak pernah bilang {you} {adj}"),
    ("id-neg-09", (), "negation", "{name} bukan {insult}, dia cuma lagi capek"),
    ("id-neg-10", (), "negation", "gak ada yang mau {tv} {you}, santai aja"),
    ("id-neg-11", (), "negation", "{group} bukan {negattr}, itu cuma stereotip"),
    ("id-neg-12", (), "negation", "tidak benar kalau {group} itu {dehum}"),
    ("id-ctr-08", (), "counter", "komentar yang menyebut orang lain {insult} sebaiknya dihapus"),
    ("id-ctr-09", (), "counter", "mengancam akan mem{tv} orang itu tindak pidana"),
    ("id-ctr-10", (), "counter", "stop bilang {group} {negattr}, itu tidak adil"),
    ("id-ctr-11", (), "counter", "pelecehan seksual di media sosial harus dilaporkan"),
    ("id-ctr-12", (), "counter", "aku nggak setuju kalau {group} disebut {dehum}"),
    ("id-quo-05", (), "quote", "berita: pria ditangkap karena mengancam mem{tv} tetangganya"),
    ("id-quo-06", (), "quote", "korban mengaku sering dipanggil '{insult}' oleh temannya"),
    ("id-quo-07", (), "quote", "polisi menyelidiki kasus pembunuhan di {city}"),
    ("id-lit-10", (), "literal", "ayo habisi makanannya, jangan disisakan"),
    ("id-lit-11", (), "literal", "hajar terus latihannya, pertandingan tinggal seminggu"),
    ("id-lit-12", (), "literal", "mati lampu lagi di {city}"),
    ("id-lit-13", (), "literal", "aku mati gaya di rumah, bosen banget"),
    ("id-lit-14", (), "literal", "di game itu kita harus {tv} monster terakhir"),
    ("id-lit-15", (), "literal", "susu sapi segar dijual di pasar"),
    ("id-lit-16", (), "literal", "dokter memeriksa paha pasien yang cedera"),
    ("id-lit-17", (), "literal", "tukang daging memotong {animal_lit} untuk kurban"),
    ("id-lit-18", (), "literal", "ketawa sampai mati gara-gara videonya"),
    ("id-lit-19", (), "literal", "pemburu menembak babi hutan di ladang"),
    ("id-grp-14", (), "identity-neutral", "{group} di {city} mengadakan acara bakti sosial"),
    ("id-grp-15", (), "identity-neutral", "sejarah {group} di Indonesia sangat panjang"),
    ("id-grp-16", (), "identity-positive", "bangga punya sahabat {group} yang {posattr}"),
    ("id-grp-17", (), "identity-neutral", "pemerintah membangun sekolah untuk anak-anak {group}"),
    ("id-pos-05", (), "praise", "{you} hebat banget, terus semangat ya"),
    ("id-pos-06", (), "praise", "{name} orangnya {posattr}, aku suka kerja bareng dia"),
    ("id-pos-07", (), "praise", "makasih {you}, bantuannya berarti banget"),
]
# Comments on the news (a domain of its own: public figures, parties, institutions), abusive and
# benign, from the project's own knowledge of Indonesian political slang ("cebong", "kadrun",
# "buzzer", "antek asing"), not from any test set.
ID_TEMPLATES += [
    ("id-nws-01", ("insult",), "insult", "{official} {insult}, kerjanya cuma makan gaji buta"),
    ("id-nws-02", ("insult",), "insult", "dasar {polinsult}, otaknya di dengkul"),
    ("id-nws-03", ("insult",), "insult", "{official} itu {adj}, rakyat jadi korban"),
    ("id-nws-04", ("insult",), "insult", "{polinsult} pada ngamuk lagi wkwk, {adj} semua"),
    ("id-nws-05", ("insult",), "insult", "pejabat {adj} kayak gitu mending mundur aja"),
    ("id-nws-06", ("insult",), "insult", "{official} maling duit rakyat, dasar {insult}"),
    ("id-nws-07", ("insult",), "insult", "komentar para {polinsult} memang {adj}"),
    ("id-nws-08", ("insult",), "insult", "rezim {adj}, {official} cuma boneka"),
    ("id-nws-09", ("insult",), "insult", "yang nulis berita ini {insult}, wartawan bayaran"),
    ("id-nws-10", ("insult",), "insult", "{official} muka tembok, gak punya malu"),
    ("id-nws-11", ("insult",), "insult", "{name} itu {polinsult} {adj}"),
    ("id-nws-12", ("insult",), "insult", "semoga {official} yang {adj} ini cepat dipenjara"),
    ("id-nws-13", ("insult", "threat"), "threat", "{official} korup harus di{tv} rame-rame"),
    ("id-nws-14", ("insult",), "insult", "otak {official} isinya cuma duit, {insult}"),
    ("id-nws-15", ("insult",), "insult", "percuma punya {official} {adj} begini"),
    ("id-nws-16", (), "news-benign", "semoga {official} amanah menjalankan tugasnya"),
    ("id-nws-17", (), "news-benign", "kebijakan {official} kali ini cukup bagus"),
    ("id-nws-18", (), "news-benign", "kapan jalan di {city} diperbaiki, pak?"),
    ("id-nws-19", (), "news-benign", "saya setuju dengan usulan {official}"),
    ("id-nws-20", (), "news-benign", "beritanya kurang lengkap, mohon dicek lagi"),
    ("id-nws-21", (), "news-benign", "{official} harus transparan soal anggaran"),
    ("id-nws-22", (), "news-benign", "saya kurang setuju, tapi mari kita lihat hasilnya"),
    ("id-nws-23", (), "news-benign", "semoga kasus korupsi di {city} cepat diusut tuntas"),
    ("id-nws-24", (), "news-benign", "terima kasih {official}, bantuannya sudah sampai"),
    ("id-nws-25", (), "news-benign", "harga kebutuhan pokok di {city} naik lagi, tolong diperhatikan"),
    ("id-nws-26", (), "news-benign", "pemilu nanti jangan golput ya"),
    ("id-nws-27", (), "news-benign", "kritik boleh, tapi tetap sopan"),
    ("id-nws-28", (), "news-benign", "mantap, semoga {city} makin maju"),
    ("id-nws-29", (), "news-benign", "{official} menjelaskan alasan kenaikan harga BBM"),
    ("id-nws-30", (), "news-benign", "data yang disampaikan {official} perlu diverifikasi"),
]
# Insult words at things and at oneself (HateCheck's "abuse against objects", and self-mockery):
# no person is insulted, so no abuse; without them "the film is a bit silly" was rejected.
ID_TEMPLATES += [
    ("id-obj-01", (), "object", "ceritanya agak {adj} tapi aku tetap suka"),
    ("id-obj-02", (), "object", "aku {adj} banget, kunci motor ketinggalan lagi"),
    ("id-obj-03", (), "object", "soal ujian tadi bikin aku merasa {adj}"),
    ("id-obj-04", (), "object", "printer kantor ini {adj}, macet terus"),
    ("id-obj-05", (), "object", "duh {adj} banget aku, salah naik bus"),
    ("id-obj-06", (), "object", "lagunya {adj} sih, tapi bikin nagih"),
    ("id-obj-07", (), "object", "aturan parkirnya agak {adj}, semoga diperbaiki"),
    ("id-obj-08", (), "object", "hp-ku {adj}, baterainya cepat habis"),
    ("id-obj-09", (), "object", "leluconnya {adj} tapi lucu juga"),
    ("id-obj-10", (), "object", "maaf ya, tadi aku {adj} lupa balas pesanmu"),
]
ID_OFFICIALS = ["pemerintah", "presiden", "menteri", "DPR", "anggota dewan", "gubernur", "bupati", "walikota", "pejabat",
                "polisi", "pak lurah", "partai itu", "KPK", "wakil rakyat", "camat"]
ID_POLITICAL_INSULTS = ["cebong", "kadrun", "kampret", "buzzer", "antek asing", "koruptor", "tikus berdasi",
                        "penjilat", "kaum sumbu pendek", "kecebong", "bani taplak"]
ID_CITIES = ["Jakarta", "Bandung", "Surabaya", "Medan", "Makassar", "Semarang", "Palembang", "Denpasar", "Yogyakarta",
             "Pontianak", "Manado", "Padang"]

ID_EVERYDAY = """Terima kasih atas bantuannya kemarin
Selamat pagi semua
Selamat siang, apa kabar?
Selamat malam, semoga mimpi indah
Makasih banyak infonya gan
Semoga harimu menyenangkan
Aku sudah sampai di rumah
Besok kita rapat jam sembilan ya
Jangan lupa makan siang
Harga cabai naik lagi minggu ini
Pemerintah mengumumkan libur nasional tahun depan
Banjir melanda beberapa wilayah Jakarta pagi ini
Timnas menang dua kol satu semalam
Resep nasi goreng ini enak sekali
Kapan kita jalan-jalan ke Bali?
Mohon maaf lahir dan batin
Selamat ulang tahun, semoga panjang umur
Hati-hati di jalan ya
Boleh minta nomor teleponnya?
Paketnya sudah saya terima, terima kasih
Maaf, saya terlambat datang
Cuaca hari ini cerah sekali
Anak-anak sedang belajar di sekolah
Ibu sedang memasak di dapur
Saya suka membaca buku sejarah
Kereta berangkat pukul tujuh pagi
Jangan lupa bawa payung, nanti hujan
Selamat menunaikan ibadah puasa
Bagus banget fotonya
Setuju sama pendapat kamu
Mantap jiwa, lanjutkan
Wah keren, aku juga mau coba
Gimana kabarnya keluarga di kampung?
Aku lagi di jalan, tunggu sebentar ya
Nanti malam nonton bola bareng yuk
Harga bensin turun mulai besok
Presiden meresmikan jalan tol baru
Gempa kecil terasa di Yogyakarta tadi malam
Warga gotong royong membersihkan selokan
Festival kuliner digelar akhir pekan ini
Sekolah libur selama dua minggu
Mahasiswa mengadakan seminar tentang lingkungan
Selamat atas kelulusannya
Semangat kerjanya hari ini
Aku kangen masakan ibu
Terima kasih sudah mampir
Produk ini bagus dan pengirimannya cepat
Penjualnya ramah, recommended
Barangnya sesuai pesanan
Tolong kirim dokumennya lewat email
Rapatnya diundur ke hari Kamis
Siapa yang mau ikut ke pasar?
Kucingku baru melahirkan tiga anak
Hari ini aku belajar masak rendang
Jalanan macet karena ada perbaikan
Aku baru selesai olahraga pagi
Kopi di warung itu enak banget
Lagunya enak didengar
Film tadi seru banget
Nilai ujianku naik semester ini
Dia teman sekelasku waktu SMA
Aku pesan dua porsi bakso
Sampai jumpa minggu depan
Salam kenal semuanya
Mohon bantuannya ya kakak
Apakah toko ini buka hari Minggu?
Berapa harga tiket ke Surabaya?
Aku setuju, ide yang bagus
Selamat hari guru untuk semua guru
Jangan lupa minum air putih
Alhamdulillah, semuanya lancar
Puji Tuhan, acaranya sukses
Om swastiastu, selamat datang
Ayo dukung produk lokal
Pemilu akan digelar bulan depan
Harga beras stabil menjelang lebaran
Bandara ditutup sementara karena cuaca buruk
Tim SAR berhasil menemukan korban
Ekonomi tumbuh lima persen tahun ini
Vaksinasi dilanjutkan di puskesmas terdekat
Terima kasih dokter dan perawat
Aku lagi belajar bahasa Inggris
Rumahnya dekat stasiun
Bisa tolong bantu angkat kardus ini?
Wkwkwk lucu banget
Hehe makasih ya
Oke siap, nanti aku kabari
Gpp kok santai aja
Iya bener banget
Nggak apa-apa, lain kali saja
Lagi hujan deras di sini
Udah makan belum?
Gue otw ke kantor
Btw besok libur kan?
Mantul gan, thanks
Semoga cepat sembuh ya
Turut berduka cita atas kepergian beliau
Selamat menempuh hidup baru
Liburan ke pantai seru banget
Santai dulu, kerjaannya besok lagi
Kakak aku kerja di Bandung
Aku suka warna biru
Pertandingan tinju semalam seru sekali
Polisi mengatur lalu lintas di perempatan
Diskon besar-besaran akhir tahun
Jangan lupa like dan subscribe
Videonya bermanfaat sekali
Izin share ya min
Info lowongan kerja dong
Semoga Indonesia makin maju
😂😂😂 lucu banget
👍 setuju
🙏 terima kasih
❤️❤️❤️
Selamat pagi 🌞""".splitlines()


def _id_slots(rng: random.Random, terms: dict) -> dict:
    listed = terms["terms"]
    regional = sorted(w for w, e in listed.items() if e["category"] == "insult" and e["region"] != "general")
    insults = ID_CORE_INSULTS + sorted(w for w, e in listed.items() if e["category"] == "insult")
    sexual = sorted(w for w, e in listed.items() if e["category"] == "sexual")
    whitelist = [w for w in terms["whitelist"] if " " not in w and len(w) > 4]
    threat = rng.choice(ID_THREAT)
    return {
        "insult": rng.choice(ID_CORE_INSULTS) if rng.random() < 0.6 else rng.choice(insults),
        "adj": rng.choice(ID_ADJ_INSULTS), "you": rng.choice(ID_YOU), "name": rng.choice(ID_NAMES),
        "animal": rng.choice(ID_ANIMALS), "tv": threat[0], "tvk": threat[1], "group": rng.choice(ID_GROUPS),
        "dehum": rng.choice(ID_DEHUM), "sexverb": rng.choice(ID_SEX_VERBS), "sexnoun": rng.choice(ID_SEX_NOUNS),
        "sexinsult": rng.choice(ID_SEX_INSULTS), "sexterm": rng.choice(sexual), "prof": rng.choice(ID_PROFANITY),
        "animal_lit": rng.choice(ID_ANIMALS_LITERAL), "whitelist": rng.choice(whitelist),
        "regional": rng.choice(regional) if regional else rng.choice(insults),
        "finger": rng.choice(EN_FINGER), "happy": rng.choice(EN_HAPPY), "negattr": rng.choice(ID_NEG_ATTR),
        "disgust": rng.choice(ID_DISGUST), "posattr": rng.choice(ID_POS_ATTR), "city": rng.choice(ID_CITIES),
        "official": rng.choice(ID_OFFICIALS), "polinsult": rng.choice(ID_POLITICAL_INSULTS),
    }


_INFORMAL = [(r"\baku\b", ["gue", "gw", "aku", "ak"]), (r"\bkamu\b", ["lu", "lo", "km", "kamu"]),
             (r"\btidak\b", ["gak", "nggak", "ga", "tdk"]), (r"\byang\b", ["yg"]), (r"\bbanget\b", ["bgt", "bangettt"]),
             (r"\bsudah\b", ["udah", "udh"]), (r"\bsaja\b", ["aja"]), (r"\bdengan\b", ["dgn", "sama"]),
             (r"\bsekali\b", ["bgt", "sekali"]), (r"\bterima kasih\b", ["makasih", "trims", "thx"]),
             (r"\bbegitu\b", ["gitu"]), (r"\bkenapa\b", ["knp", "napa"])]


def informal(text: str, rng: random.Random) -> str:
    """The text in chat spelling: pronouns and particles swapped, abbreviations, a term's own
    short form (ID_ALAY), stretched last letters, sometimes capitals."""
    for pattern, choices in _INFORMAL:
        text = re.sub(pattern, lambda _m, c=choices: rng.choice(c), text)
    for word, forms in ID_ALAY.items():
        if rng.random() < 0.7:
            text = re.sub(rf"\b{word}\b", lambda _m, f=forms: rng.choice(f), text)
    if rng.random() < 0.3:
        text = re.sub(r"(\w)(\W*)$", lambda m: m.group(1) * rng.randint(2, 4) + m.group(2), text)
    if rng.random() < 0.15:
        text = text.upper()
    return text


# Contrast twins (HateCheck's minimal pairs): an abusive template whose only abusive words are
# these slots is also filled with kind words, as a benign row of the same group (so both halves
# fall in one split). The frame ("{group} itu ...", "{name} memang ...") then decides nothing:
# without them "orang Jawa itu ramah" scored hate 0.97.
ID_KIND_NOUNS = ["saudara kita", "teman yang baik", "pahlawan", "tetangga yang ramah", "orang hebat", "sahabat",
                 "guru yang sabar", "orang jujur"]
TWIN_SLOTS = {"dehum": ID_KIND_NOUNS, "insult": ID_KIND_NOUNS, "regional": ID_KIND_NOUNS}
TWIN_ADJ_SLOTS = ("adj", "negattr")
UNTWINNABLE = ("{tv", "{tvk", "{sex", "{prof", "{animal}", "{finger", "{disgust", "bunuh", "basmi", "usir", "bakar",
               "mati", "najis", "benci", "diusir", "penipu", "binatang", "sampah", "rusak", "penyakit", "rendah",
               "gunanya", "serang", "pantas", "harganya", "tarif", "telanjang", "bugil", "kosong", "jijik", "parang",
               "mampus", "leher", "kepala", "nyawa", "kuhabisi", "nama", "pergi", "tempat", "manusia", "pulang", "bau", "sok",
               "diam", "diem", "mending", "kerja yang benar", "becus", "makan uang", "mikir", "malu", "belagu", "ngaca",
               "berkedok", "temen", "ngerti", "buta", "masalah", "onar", "aib", "hancur", "lenyap", "dikurung",
               "dikeluarkan", "tolak", "sudi", "hak apa-apa", "layak", "komen", "maling", "gaji buta", "dengkul",
               "boneka", "bayaran", "tembok", "dipenjara", "duit", "percuma", "{polinsult}")


def _twin(pattern: str, positive: tuple) -> bool:
    return bool(positive) and any(f"{{{slot}}}" in pattern for slot in (*TWIN_SLOTS, *TWIN_ADJ_SLOTS)) and not any(
        word in pattern for word in UNTWINNABLE)


def _expand(templates, slots_for, everyday, language: str, source: str, rng: random.Random) -> list[Row]:
    rows = []
    for template_id, positive, functionality, pattern in templates:
        if language == "id" and _twin(pattern, positive):
            for _ in range(FILLS[language] // 2):
                slots = slots_for(rng)
                for slot, kind in TWIN_SLOTS.items():
                    slots[slot] = rng.choice(kind)
                for slot in TWIN_ADJ_SLOTS:
                    slots[slot] = rng.choice(ID_POS_ATTR)
                text = pattern.format(**slots)
                rows.append(Row(informal(text, rng) if rng.random() < 0.4 else text, language, source, (), (),
                                group=template_id, functionality="contrast"))
        seen = set()
        for _ in range(FILLS[language] * 3):
            if len(seen) >= FILLS[language]:
                break
            slots = slots_for(rng)
            text = pattern.format(**slots)
            if rng.random() < 0.4 and language == "id":
                text = informal(text, rng)
            if rng.random() < 0.5:
                text = text[:1].upper() + text[1:]
            if text in seen:
                continue
            seen.add(text)
            rows.append(Row(text, language, source, tuple(positive), (), group=template_id, functionality=functionality))
    for k, text in enumerate(everyday):
        # Groups of five sentences, so a held-out group is five sentences the model never saw.
        rows.append(Row(text, language, source, (), (), group=f"{language}-everyday-{k // 5:02d}", functionality="everyday"))
        if language == "id":
            variant = informal(text.lower(), rng)
            if variant != text.lower():
                rows.append(Row(variant, language, source, (), (), group=f"{language}-everyday-{k // 5:02d}",
                                functionality="everyday"))
    return rows


def lexicon(terms: dict) -> list[Row]:
    """Each curated term and spelling variant alone and after "dasar" (you ...): a word no
    template happened to draw is still seen. One group per term, variants with it."""
    rows = []
    for word, entry in terms["terms"].items():
        positive = (entry["category"],) if entry["category"] != "profanity" else ("profanity", "insult")
        for form in [word, *entry["variants"]]:
            for text in (form, f"dasar {form}"):
                rows.append(Row(text, "id", "written-id", positive, (), group=f"id-term-{word}", functionality="term"))
    # The whitelist's words alone: words that contain a term ("asbak", "bangsa", "pantai") are no abuse.
    for k, word in enumerate(terms["whitelist"]):
        rows.append(Row(word, "id", "written-id", (), (), group=f"id-whitelist-{k // 10:03d}", functionality="contains"))
    return rows


def indonesian() -> list[Row]:
    rng = random.Random(SEED)
    terms = load_terms()
    return (_expand(ID_TEMPLATES, lambda r: _id_slots(r, terms), ID_EVERYDAY, "id", "written-id", rng) + lexicon(terms)
            + long_comments())


# --- Indonesian long comments ------------------------------------------------------------------
# Comments on the news are long: several sentences of opinion, criticism, questions, about
# officials, parties, prices, the courts, football. Every written text above is one sentence, so
# the model had never seen a long benign argumentative comment (it flagged them) nor one insult
# inside one. Written from the project's own knowledge of the language (no outside set's text
# read): benign sentences of argument and criticism, and abusive ones (political insults such as
# "cebong", "kadrun", "planga plongo", "antek aseng"; slang such as "bacot", "otak udang";
# regional swearing such as "jancok", "kehed", "pukimak"; attacks on groups), each tagged with its
# categories. Each sentence stands alone as a row, and 2-5 benign sentences of one pool make a
# long benign comment. Long comments with an abusive sentence among benign ones were tried and
# left out (training/RESULTS.md): labelled abusive as a whole, they taught the model that the
# benign political sentences around an insult are abuse; a long text is judged by its worst
# sentence anyway (moderation.text.parts).
#
# The sentences are dealt into LONG_POOLS pools (sentence k into pool k mod LONG_POOLS), and a
# comment takes all its sentences from one pool, whose id is its group: a held-out pool's comments
# are made of sentences the model never saw in training.
LONG_POOLS = 20
LONG_FILLS = 24  # benign comments per pool (at most)
ID_LONG_BENIGN = """Menurut saya kebijakan ini belum matang dan perlu dikaji ulang.
Rakyat kecil yang paling merasakan dampaknya, semoga pemerintah mendengar.
Harga beras naik terus, gaji tidak naik-naik.
Saya bukan pendukung siapa-siapa, cuma ingin negara ini lebih baik.
Kalau memang terbukti korupsi, ya harus dihukum sesuai aturan yang berlaku.
Beritanya terlalu berat sebelah, mohon wartawan lebih berimbang.
Dulu dijanjikan lapangan kerja, sekarang mana buktinya?
Jangan mudah percaya berita hoaks, cek dulu sumbernya.
Pembangunan jalan tol memang bagus, tapi jalan di desa juga perlu diperhatikan.
Saya sudah tiga kali lapor ke kelurahan tapi belum ada tanggapan.
Semua partai sama saja, menjelang pemilu baru turun ke bawah.
Mari kita kawal bersama proses hukumnya sampai selesai.
Kasihan para korban banjir, semoga bantuan cepat sampai.
Pajak naik, pelayanan publik masih begitu-begitu saja.
Saya heran kenapa kasus ini tidak pernah diusut tuntas.
Biarkan pengadilan yang memutuskan, jangan main hakim sendiri.
Anggaran sebesar itu seharusnya bisa dipakai untuk sekolah dan puskesmas.
Mohon maaf, tapi argumen bapak kurang masuk akal buat saya.
Kita boleh beda pilihan, tapi tetap satu bangsa.
Setiap tahun masalahnya sama, macet dan banjir, solusinya mana?
Kebijakan impor ini merugikan petani lokal.
Semoga hakim bisa adil dan tidak bisa dibeli.
Dulu saya dukung, sekarang saya kecewa dengan kinerjanya.
Saya rasa ada kepentingan politik di balik keputusan ini.
Transportasi umum di kota kami masih sangat kurang.
Sebaiknya dana bansos diawasi supaya tepat sasaran.
Coba baca dulu isi beritanya sampai habis sebelum berkomentar.
Yang salah tetap harus bertanggung jawab, siapa pun orangnya.
Polisi harus bekerja profesional dan transparan dalam kasus ini.
Harusnya DPR lebih banyak mendengar aspirasi masyarakat.
Ini bukti bahwa pengawasan kita masih lemah.
Saya setuju sebagian, tapi soal pajak saya tidak sepakat.
Semoga menteri yang baru bisa membawa perubahan.
Berita seperti ini bikin masyarakat makin tidak percaya sama pemerintah.
Utang negara terus bertambah, generasi berikutnya yang menanggung.
Subsidi harus tepat sasaran, jangan dinikmati orang kaya.
Saya warga biasa, yang penting harga stabil dan kerja lancar.
Debat kemarin kurang substansi, lebih banyak saling sindir.
Kalau tidak setuju, sampaikan lewat jalur yang benar.
Mahasiswa turun ke jalan karena merasa suaranya tidak didengar.
Tolong jangan bawa-bawa agama ke urusan politik.
Sudah saatnya kita memilih pemimpin berdasarkan rekam jejak.
Sayang sekali, programnya bagus tapi pelaksanaannya kacau.
Rumah sakit di daerah masih kekurangan dokter spesialis.
Mudah-mudahan kasus ini jadi pelajaran buat semua pejabat.
Keadilan di negeri ini sering tajam ke bawah tumpul ke atas.
Saya kecewa, tapi tetap berharap ada perbaikan.
Pendidikan harus jadi prioritas utama, bukan proyek mercusuar.
Harga tiket pesawat mahal sekali menjelang lebaran.
Kenapa baru sekarang ditangani, padahal sudah lama dilaporkan warga?
Komentar di sini kebanyakan emosi, mari berdiskusi dengan kepala dingin.
Ini opini pribadi saya, boleh setuju boleh tidak.
Investasi asing perlu, tapi jangan sampai merugikan warga sekitar.
Ojek online juga butuh perlindungan dan aturan yang jelas.
Semoga pemilu tahun depan berjalan jujur dan damai.
Bapak itu dulu berjanji menurunkan harga, sekarang malah naik.
Lingkungan rusak karena tambang, siapa yang mau tanggung jawab?
Saya tinggal di pinggiran kota, air bersih masih susah.
Yang penting hukum ditegakkan, bukan sekadar pencitraan.
Wajar kalau rakyat marah, tapi jangan sampai anarkis.
Semoga aparat tidak represif terhadap pendemo.
Kalau dipikir-pikir, masalah utamanya ada di birokrasi yang berbelit.
Sebagai guru honorer, gaji saya jauh dari cukup.
Mohon pemerintah daerah segera memperbaiki jembatan yang rusak.
Jangan cuma pandai bicara di televisi, buktikan dengan kerja.
Data kemiskinan yang dipakai sepertinya sudah tidak akurat.
Timnas main bagus semalam, semoga konsisten.
Pelatihnya harus berani rotasi pemain, yang muda diberi kesempatan.
Wasitnya kurang tegas, banyak pelanggaran yang dibiarkan.
Artis itu berhak atas privasinya, tidak usah terlalu diurusi.
Netizen sekarang gampang sekali menghakimi orang tanpa tahu faktanya.
Kita doakan saja semoga korban cepat pulih.
Turut berduka cita untuk keluarga yang ditinggalkan.
Saya pernah mengalami hal yang sama, memang prosesnya lama.
Bagus, akhirnya ada tindakan nyata dari pemerintah kota.
Program vaksinasi di tempat saya berjalan lancar, terima kasih nakes.
Kalau mau maju, korupsi harus diberantas dari akarnya.
Pengusaha kecil banyak yang gulung tikar karena aturan ini.
Sebaiknya ada uji publik dulu sebelum undang-undang disahkan.
Saya mendukung langkah KPK, terus semangat.
Warga di sini sudah menunggu bertahun-tahun tapi belum ada kepastian.
Media harus tetap kritis terhadap siapa pun yang berkuasa.
Kasus seperti ini bukan yang pertama, dan mungkin bukan yang terakhir.
Lebih baik fokus ke solusi daripada saling menyalahkan.
Tanah rakyat jangan digusur tanpa ganti rugi yang layak.
Harga cabai sempat naik, sekarang sudah mulai turun.
Siapa pun presidennya, yang penting rakyat sejahtera.
Saya tidak membela siapa-siapa, hanya menyampaikan fakta.
Lembaga yang mengawasi harus independen.
Sepertinya judul beritanya terlalu provokatif.
Anak muda harus melek politik supaya tidak mudah dibohongi.
Pelayanan di kantor pajak sekarang sudah jauh lebih baik.
Semoga pelakunya cepat tertangkap dan korban mendapat keadilan.
Banyak janji kampanye yang belum ditepati sampai sekarang.
Saya menunggu penjelasan resmi dari kementerian terkait.
Jangan sampai isu ini dipakai untuk memecah belah masyarakat.
Program makan siang gratis bagus, asal anggarannya jelas.
Petani butuh pupuk murah, bukan janji.
Ekonomi lagi susah, semoga tahun depan lebih baik.
Salut untuk relawan yang membantu di lokasi bencana.""".splitlines()
# (categories, sentence)
ID_LONG_ABUSIVE = [
    (("insult",), "Dasar cebong dungu, dikasih janji aja sudah senang."),
    (("insult",), "Kadrun otaknya cuma isi kebencian."),
    (("insult",), "Pejabat goblok, kerjanya cuma foto-foto."),
    (("insult",), "Otak lu di dengkul ya, baca berita aja gak ngerti."),
    (("insult",), "Bacot lu kayak comberan."),
    (("insult",), "Presiden planga plongo, bisanya cuma bagi-bagi sepeda."),
    (("insult", "profanity"), "Anggota dewan itu tikus berdasi semua, bangsat."),
    (("insult",), "Mampus aja lu koruptor, biar tau rasa."),
    (("insult",), "Wartawan bayaran, nulis berita kayak sampah."),
    (("insult",), "Buzzer goblok, dibayar berapa lu?"),
    (("insult",), "Dasar kampret, kerjanya nyinyir doang."),
    (("insult", "profanity"), "Mulut pejabat itu kayak tai, bau."),
    (("profanity", "insult"), "Asu tenan, rakyat disuruh sabar terus."),
    (("profanity", "insult"), "Jancok, janji kampanye cuma omong kosong, dasar penipu."),
    (("insult", "hate"), "Kalian semua antek aseng, pengkhianat bangsa."),
    (("insult",), "Menteri tolol, gak becus ngurus negara."),
    (("insult",), "Otak udang, gak bisa mikir sama sekali."),
    (("insult", "profanity"), "Muka tembok, udah ketahuan korupsi masih senyum-senyum, bajingan."),
    (("insult",), "Lu pendukung buta, bego banget sih."),
    (("hate",), "Dasar kafir laknat, pantas kena azab."),
    (("hate",), "Orang-orang Cina itu yang bikin negara ini rusak."),
    (("hate", "insult"), "Dasar PKI, komunis busuk, usir dari sini."),
    (("insult",), "Gubernur sinting, kebijakannya ngawur semua."),
    (("hate", "insult"), "Bani serbet kerjanya demo terus, dungu."),
    (("insult", "profanity"), "Polisi brengsek, bisanya cuma nilang."),
    (("insult",), "Kampungan banget komentar lu, dasar udik."),
    (("insult",), "Pendukungnya sama begonya sama junjungannya."),
    (("threat", "insult"), "Gw tabok juga lu kalau ketemu, bacot doang."),
    (("hate", "insult"), "Monyet, pulang sana ke hutan."),
    (("insult",), "Pemimpin boneka, cuma bisa manggut-manggut kayak kerbau dicucuk hidungnya."),
    (("insult",), "Ngehe lu semua, bisanya cuma ngeluh."),
    (("threat",), "Biadab, pelakunya harus digantung rame-rame."),
    (("sexual", "insult"), "Dasar lonte politik, jual diri demi jabatan."),
    (("insult", "profanity"), "Koruptor anjing, mati aja lu."),
    (("insult",), "Partai penipu, isinya maling semua."),
    (("insult",), "Kunyuk, jangan sok suci lu."),
    (("profanity", "insult"), "Taik kucing janjinya."),
    (("insult",), "Dasar sengkuni, licik kayak ular."),
    (("insult",), "Haters goblok, iri bilang bos."),
    (("insult",), "Sarap nih orang, komennya gak ada otak."),
    (("insult", "profanity"), "Kehed siah, ngomong sembarangan."),
    (("profanity", "insult"), "Pukimak, pejabat kerjanya makan duit rakyat."),
    (("profanity", "insult"), "Cok, goblok banget kebijakan iki."),
    (("profanity", "sexual"), "Kontol, debatnya kosong semua."),
    (("insult",), "Lu tuh cuma sampah masyarakat yang ngerasa paling bener."),
    (("insult",), "Dasar munafik, ngomong agama tapi nyolong duit."),
    (("profanity", "insult"), "Asu, wasit buta dibayar mafia."),
    (("insult", "hate"), "Pemain bego, main bola kayak banci."),
    (("insult",), "Rezim dungu, rakyat dikorbankan terus."),
    (("insult",), "Komen lu kayak orang gak sekolah, tolol."),
    (("hate", "insult"), "Ente kadal gurun, pulang ke Arab sana."),
    (("insult",), "Si botak itu penjilat, cari muka doang."),
    (("insult",), "Dasar bocah ingusan, tau apa lu soal politik."),
    (("insult",), "Lambe turah, bisanya fitnah orang."),
    (("insult",), "Negara dipimpin orang goblok ya begini jadinya."),
    (("insult", "profanity"), "Hakimnya bangsat, bisa dibeli."),
    (("insult",), "Sinting lu, dukung koruptor."),
    (("insult",), "Dasar otak kosong, gak malu apa."),
    (("threat", "insult"), "Gue sumpahin lu mati kecelakaan, pejabat keparat."),
    (("insult",), "Dasar pecundang, kalah pemilu terus nangis."),
]


def long_comments() -> list[Row]:
    """Long benign Indonesian comments, and every benign and abusive sentence alone (see above)."""
    rng = random.Random(SEED + 1)
    rows = []
    for pool in range(LONG_POOLS):
        group = f"id-long-{pool:02d}"
        benign = ID_LONG_BENIGN[pool::LONG_POOLS]
        abusive = ID_LONG_ABUSIVE[pool::LONG_POOLS]

        def spelled(text: str) -> str:
            if rng.random() < 0.3:
                return informal(text.lower() if rng.random() < 0.5 else text, rng)
            return text.lower() if rng.random() < 0.3 else text

        for text in benign:
            rows.append(Row(spelled(text), "id", "written-id", (), (), group=group, functionality="long-sentence"))
        for positive, text in abusive:
            rows.append(Row(spelled(text), "id", "written-id", positive, (), group=group, functionality="long-sentence"))
        seen: set[str] = set()
        for _ in range(LONG_FILLS * 4):
            if len(seen) >= LONG_FILLS:
                break
            chosen = rng.sample(benign, rng.randint(2, min(5, len(benign))))
            text = spelled(rng.choice((" ", " ", "\n", "  ")).join(chosen))
            if text not in seen:
                seen.add(text)
                rows.append(Row(text, "id", "written-id", (), (), group=group, functionality="long-benign"))
    return rows


# --- English -----------------------------------------------------------------------------------

EN_INSULTS = ["idiot", "moron", "loser", "dumbass", "jerk", "clown", "asshole", "dickhead", "imbecile", "fool",
              "prick", "piece of shit", "scumbag", "waste of space", "retard", "twat", "bastard", "bitch"]
EN_ADJ = ["stupid", "dumb", "pathetic", "worthless", "useless", "brainless", "disgusting", "ugly"]
EN_YOU = ["you", "u", "ya", "you guys"]
EN_NAMES = ["John", "Maria", "Ahmed", "Priya", "Tom", "Kevin", "Sarah", "Lee", "Fatima", "Carlos", "Emma", "Mike"]
EN_THREAT = ["kill", "stab", "shoot", "murder", "strangle", "beat", "hurt", "slit the throat of", "burn", "choke"]
EN_GROUPS = ["Muslims", "Jews", "Christians", "gay people", "trans people", "women", "Black people", "immigrants",
             "refugees", "disabled people", "Mexicans", "Asians", "Arabs", "Hindus", "lesbians", "Indonesians"]
EN_DEHUM = ["vermin", "rats", "animals", "parasites", "cockroaches", "a disease", "filth", "trash", "subhuman"]
EN_PROF = ["fuck", "shit", "damn it", "fucking hell", "holy shit", "goddammit", "bullshit", "wtf", "crap", "fml"]
EN_SEX = ["send me nudes", "show me your tits", "I want to fuck you", "suck my dick", "sit on my face",
          "let me see you naked", "I'd bend you over", "you'd look better naked", "show me what's under that skirt",
          "wanna sext?"]

EN_TEMPLATES = [
    ("en-ins-01", ("insult",), "insult", "{you} are such a {insult}"),
    ("en-ins-02", ("insult",), "insult", "shut up {insult}"),
    ("en-ins-03", ("insult",), "insult", "{name} is a {adj} {insult}"),
    ("en-ins-04", ("insult",), "insult", "nobody asked, {insult}"),
    ("en-ins-05", ("insult",), "insult", "what a {adj} take, {insult}"),
    ("en-ins-06", ("insult",), "insult", "go cry somewhere else {insult}"),
    ("en-ins-07", ("insult",), "insult", "{you} {adj} {insult}"),
    ("en-ins-08", ("insult",), "insult", "{insult} 🖕"),
    ("en-ins-09", ("insult",), "insult", "🖕🖕 {you}"),
    ("en-ins-10", ("insult",), "insult", "get lost {you} {adj} piece of garbage"),
    ("en-thr-01", ("threat",), "threat", "I will {tv} {you}"),
    ("en-thr-02", ("threat",), "threat", "I'm going to {tv} {name} tonight"),
    ("en-thr-03", ("threat",), "threat", "watch your back, I know where you live"),
    ("en-thr-04", ("threat",), "threat", "say that again and I'll {tv} {you}"),
    ("en-thr-05", ("threat",), "threat", "{name} deserves to be shot"),
    ("en-thr-06", ("threat",), "threat", "someone should {tv} {name} and their family"),
    ("en-thr-07", ("threat",), "threat", "I'll find you and {tv} you 🔪"),
    ("en-thr-08", ("threat",), "threat", "you won't live to see tomorrow"),
    ("en-thr-09", ("threat",), "threat", "gonna {tv} you when I see you"),
    ("en-thr-10", ("threat", "hate"), "threat", "all {group} should be {killed}"),
    ("en-thr-11", ("threat",), "threat", "I'm going to {tv} you"),
    ("en-thr-12", ("threat",), "threat", "i will find you and {tv} you"),
    ("en-thr-13", ("threat",), "threat", "you're dead, I swear I'll {tv} you"),
    ("en-thr-14", ("threat",), "threat", "keep talking and I will {tv} {you}"),
    ("en-thr-15", ("threat",), "threat", "I know where {name} lives, tonight I {tv} them"),
    ("en-thr-16", ("threat",), "threat", "we are coming for you with guns"),
    ("en-thr-17", ("threat",), "threat", "i'll put a bullet in your head"),
    ("en-thr-18", ("threat",), "threat", "hope someone will {tv} {you} soon"),
    ("en-thr-19", ("threat",), "threat", "next time I see {you} I will {tv} {you}"),
    ("en-thr-20", ("threat",), "threat", "{you} will die tonight"),
    ("en-thr-21", ("threat", "insult"), "threat", "I'll {tv} you, {insult}"),
    ("en-hat-01", ("hate",), "identity", "{group} are {dehum}"),
    ("en-hat-02", ("hate",), "identity", "I hate {group}, every single one of them"),
    ("en-hat-03", ("hate",), "identity", "{group} should go back where they came from"),
    ("en-hat-04", ("hate",), "identity", "never trust {group}"),
    ("en-hat-05", ("hate",), "identity", "{group} are ruining this country"),
    ("en-sex-01", ("sexual",), "sexual", "{sex}"),
    ("en-sex-02", ("sexual",), "sexual", "hey {name}, {sex}"),
    ("en-sex-03", ("sexual", "insult"), "sexual", "{sex}, you {adj} slut"),
    ("en-sex-04", ("sexual",), "sexual", "{sex} 🍆💦"),
    ("en-sex-05", ("sexual",), "sexual", "{sex}, baby"),
    ("en-sex-06", ("sexual",), "sexual", "{name} {sex}"),
    ("en-sex-07", ("sexual",), "sexual", "hey sexy, {sex}"),
    ("en-sex-08", ("sexual",), "sexual", "{sex} or I'll tell everyone"),
    ("en-sex-09", ("sexual",), "sexual", "nice {body}, {sex}"),
    ("en-sex-10", ("sexual",), "sexual", "I want to touch your {body}"),
    ("en-sex-11", ("sexual",), "sexual", "your {body} makes me so hard"),
    ("en-sex-12", ("sexual", "insult"), "sexual", "shut up and {sex}, whore"),
    ("en-pro-01", ("profanity",), "profanity", "{prof}, I missed the bus again"),
    ("en-pro-02", ("profanity",), "profanity", "{prof}! the wifi is down"),
    ("en-pro-03", ("profanity",), "profanity", "this weather is {prof}"),
    ("en-pro-04", ("profanity",), "profanity", "{prof}, forgot my keys"),
    ("en-pro-05", ("profanity", "insult"), "profanity", "fuck you"),
    ("en-pro-06", ("profanity", "insult"), "profanity", "fuck off {insult}"),
    ("en-pro-07", ("profanity",), "profanity", "🖕🖕🖕"),
    ("en-neg-01", (), "negation", "{you} are not a {insult}, don't listen to them"),
    ("en-neg-02", (), "negation", "I would never {tv} anyone"),
    ("en-neg-03", (), "negation", "{group} are not {dehum}, they are people"),
    ("en-neg-04", (), "negation", "nobody thinks {name} is {adj}"),
    ("en-ctr-01", (), "counter", "calling {group} {dehum} is hateful and wrong"),
    ("en-ctr-02", (), "counter", "please don't call people {insult}s, it's hurtful"),
    ("en-ctr-03", (), "counter", "threats like that should be reported"),
    ("en-quo-01", (), "quote", "he called me a {insult} and I reported it"),
    ("en-quo-02", (), "quote", "the suspect threatened to {tv} the victim, police said"),
    ("en-lit-01", (), "literal", "this game is killing it, great job"),
    ("en-lit-02", (), "literal", "I could {tv} for a pizza right now"),
    ("en-lit-03", (), "literal", "the {animal} in the park was so cute"),
    ("en-sub-01", (), "contains", "I live near {scunthorpe}"),
    ("en-sub-02", (), "contains", "we studied {scunthorpe} in class today"),
    ("en-sub-03", (), "contains", "{scunthorpe} and {scunthorpe2}"),
    ("en-sub-04", (), "contains", "have you seen {scunthorpe}?"),
    ("en-sub-05", (), "contains", "the story of {scunthorpe}, by {scunthorpe2}"),
    ("en-sub-06", (), "contains", "{scunthorpe}"),
    ("en-sub-07", (), "contains", "my notes on {scunthorpe} and {scunthorpe2} are ready"),
    ("en-sub-08", (), "contains", "a classic: {scunthorpe}"),
    ("en-grp-01", (), "identity-neutral", "many of my friends are {group}"),
    ("en-grp-02", (), "identity-neutral", "{group} have the same rights as everyone"),
    ("en-grp-03", (), "identity-neutral", "I'm proud to stand with {group}"),
    ("en-pos-01", (), "praise", "{you} are amazing, thank you {name}"),
    ("en-pos-02", (), "praise", "great video {name}, keep it up"),
    ("en-pos-03", (), "praise", "{you} are {nice}"),
    ("en-pos-04", (), "praise", "{you} look {nice} today"),
    ("en-pos-05", (), "praise", "thank {you}, {you} are so {nice}"),
    ("en-pos-06", (), "praise", "{name} is {nice}"),
    ("en-pos-07", (), "praise", "{you} are {nice} and I love it"),
    ("en-pos-08", (), "praise", "honestly {you} are {nice}"),
    ("en-pos-09", (), "praise", "{name}, {you} are {nice}!"),
    ("en-pos-10", (), "praise", "what a {nice} idea"),
    ("en-pos-11", (), "praise", "{you} are {nice}, thanks for everything"),
    ("en-pos-12", (), "praise", "{you}'re {nice}"),
    ("en-emo-01", ("insult", "profanity"), "emoji", "{finger}"),
    ("en-emo-02", ("insult", "profanity"), "emoji", "{finger} {you}"),
    ("en-emo-03", ("threat",), "emoji", "🔪🔪 {you} next"),
    ("en-emo-04", ("threat",), "emoji", "🔫 {you} are dead"),
    ("en-emo-05", (), "emoji", "{happy}"),
    ("en-emo-06", (), "emoji", "{happy} {nice}"),
]
EN_NICE = ["lovely", "amazing", "kind", "wonderful", "great", "brilliant", "awesome", "sweet", "beautiful", "smart",
           "funny", "the best", "so helpful", "a star", "right"]
EN_FINGER = ["🖕", "🖕🖕", "🖕🖕🖕", "🖕🏻", "🖕🏿🖕🏿", "🖕🏽🖕🏽🖕🏽", "🖕😡", "🖕🖕🖕🖕", "😡🖕"]
EN_HAPPY = ["😂", "😂😂", "❤️", "👍", "🙏", "🎉", "😊", "🥰", "👏👏", "🔥🔥", "😍", "✨", "💯", "🤣🤣", "👌", "🏳️‍🌈", "🏳️‍🌈❤️",
            "🏳️‍⚧️"]
EN_WORDS = """hello
thanks
ok
lol
nice
congrats
good luck
see you
welcome
yes
no
maybe
agreed
cheers
wow
cool
perfect
amazing
great
sure
bye
morning
interesting
classic
brilliant
sounds good
noted
done
same here
me too
London
Manchester
Jakarta
Surabaya
Bandung
Sydney
Toronto
Berlin
Paris
Tokyo
Monday
weekend
football
coffee
breakfast
homework
birthday party
project update
new phone
holiday photos
Christmas
Ramadan
Diwali
Hanukkah
Eid Mubarak
Merry Christmas
happy new year
good night
well done
bravo""".splitlines()
EN_EVERYDAY = """Thanks for your help yesterday
Good morning everyone
See you at the meeting tomorrow
Happy birthday! Have a great day
Can you send me the report?
The train is late again today
I loved the new episode
Congratulations on the new job
What time does the store open?
Have a safe trip home
This recipe is delicious
Thank you so much for sharing
I agree with your point
Let's grab lunch next week
The weather is lovely today
Great game last night
Sorry I missed your call
Welcome to the group
Looking forward to the weekend
Please check your email
😂😂😂 so funny
👍 sounds good
🙏 thank you
❤️❤️
🎉🎉 congrats
The meeting moved to 3pm on Thursday, room 204
Bring two pens and a charger to the workshop
The 5th edition ships with a USB-C cable
Our team won the quiz night at the pub
The library opens at 9am on weekdays
The forecast says rain all weekend
We planted tomatoes and basil in the garden
The children painted the fence blue
Please water the plants while I'm away
The bus was ten minutes late this morning
My sister just started a new job in Leeds
I'm baking bread for the neighbours
The concert tickets sold out in an hour
Dinner is at seven, don't be late
The new update fixed the login bug
Can someone review my pull request?
The server restarts every night at 2am
I'm reading a book about the Roman empire
The museum has a new dinosaur exhibit
Our cat keeps sleeping on the keyboard
The recipe needs three eggs and a cup of flour
We hiked up the hill and watched the sunset
The school play is on Friday evening
Thanks for the feedback on my essay
The shop is closed for the holidays
I finally fixed the leaking tap
The train to Bristol leaves from platform 4
We are collecting old clothes for the shelter
The council will repair the road next month
The results will be announced at noon
Happy anniversary to my parents
I love the colours of autumn
The printer is out of paper again
Is the swimming pool open on Sundays?
The football match ended in a draw
Our volunteers cleaned up the beach
The new café downtown makes great coffee
My flight lands at 6:45 tomorrow
The package arrived safe and sound
I have a dentist appointment at 10
The kids built a sandcastle at the beach
Remember to vote on Tuesday
The price of petrol went up again
She graduated with honours last week
The book club meets on the first Monday
We adopted a puppy from the shelter
Let me know if you need anything else
The photos from the trip are online
Good luck with your exams""".splitlines()
# Words that hold a term and are no abuse (the Scunthorpe family).
EN_SCUNTHORPE = ["Scunthorpe", "Middlesex", "Penistone", "Dickens novels", "the assassin's creed", "classic cocktails",
                 "Essex", "cockpit design", "a shiitake risotto", "the Cockburn report", "Sussex", "a peacock",
                 "Hitchcock films", "Emily Dickinson", "the assessment", "bass guitar", "the grass", "a passage",
                 "the embassy", "cucumber salad", "a cumulative total", "the therapist", "a pianist", "the title",
                 "peanut butter", "the buttons", "a shell", "the document", "the dictionary", "Arsenal", "the basement",
                 "a sextant", "a string sextet", "the analysis", "Lightwater", "Cockermouth", "Shitterton", "a hancock",
                 "massive class sizes", "the spice rack", "a harpsichord", "the mass", "Matsushita", "a shuttlecock"]
EN_BODY = ["tits", "ass", "boobs", "pussy", "body", "legs", "lips", "dick"]
EN_KILLED = ["killed", "shot", "exterminated", "wiped out", "gassed"]
EN_ANIMALS = ["dog", "cat", "pig", "monkey", "donkey", "rat"]


def _en_slots(rng: random.Random) -> dict:
    return {"nice": rng.choice(EN_NICE), "finger": rng.choice(EN_FINGER), "happy": rng.choice(EN_HAPPY),"insult": rng.choice(EN_INSULTS), "adj": rng.choice(EN_ADJ), "you": rng.choice(EN_YOU),
            "name": rng.choice(EN_NAMES), "tv": rng.choice(EN_THREAT), "group": rng.choice(EN_GROUPS),
            "dehum": rng.choice(EN_DEHUM), "prof": rng.choice(EN_PROF), "sex": rng.choice(EN_SEX),
            "killed": rng.choice(EN_KILLED), "animal": rng.choice(EN_ANIMALS), "scunthorpe": rng.choice(EN_SCUNTHORPE), "scunthorpe2": rng.choice(EN_SCUNTHORPE), "body": rng.choice(EN_BODY)}


def english() -> list[Row]:
    return _expand(EN_TEMPLATES, _en_slots, EN_EVERYDAY + EN_WORDS, "en", "written-en", random.Random(SEED + 1))


# --- everyday German and French ---------------------------------------------------------------
# The public German and French sets are tweets about politics and migration: everyday sentences
# keep the model from reading any German or French sentence as an insult.

DE_EVERYDAY = """Guten Morgen zusammen, wie geht es euch?
Vielen Dank für die schnelle Antwort
Der Zug nach Berlin fährt um 8 Uhr ab
Wir treffen uns am Samstag im Park
Das Wetter ist heute wirklich schön
Kannst du mir bitte das Dokument schicken?
Herzlichen Glückwunsch zum Geburtstag
Die Bibliothek ist am Sonntag geschlossen
Ich koche heute Abend Spaghetti für alle
Das Konzert war gestern großartig
Die Sitzung wurde auf Donnerstag verschoben
Meine Schwester studiert Medizin in München
Der Bus hatte heute zehn Minuten Verspätung
Wir haben Tomaten und Basilikum im Garten gepflanzt
Bitte vergiss nicht, die Blumen zu gießen
Das Museum zeigt eine neue Ausstellung über Schiffe
Der Preis für Brot ist wieder gestiegen
Schönes Wochenende und bis Montag
Ich lese gerade ein Buch über die Geschichte Europas
Die Kinder spielen draußen Fußball
Das Paket ist heute angekommen, danke
Der Arzttermin ist um halb zehn
Wir fahren im Sommer an die Ostsee
Die neue Version behebt den Fehler beim Login
Frohe Weihnachten und ein gutes neues Jahr
Das ist eine gute Idee, machen wir so
Die Straße wird nächste Woche repariert
Ich habe das Problem mit dem Drucker gelöst
Das Restaurant an der Ecke ist sehr gemütlich
Viel Erfolg bei der Prüfung morgen""".splitlines()
FR_EVERYDAY = """Bonjour à tous, bonne journée
Merci beaucoup pour votre aide
Le train pour Lyon part à 9 heures
On se retrouve samedi au parc
Il fait très beau aujourd'hui
Peux-tu m'envoyer le document, s'il te plaît ?
Joyeux anniversaire, profite bien de ta journée
La bibliothèque est fermée le dimanche
Ce soir je prépare une tarte aux pommes
Le concert d'hier était magnifique
La réunion est reportée à jeudi
Ma sœur étudie la médecine à Paris
Le bus avait dix minutes de retard ce matin
Nous avons planté des tomates dans le jardin
N'oublie pas d'arroser les plantes
Le musée présente une nouvelle exposition
Bon week-end et à lundi
Je lis un livre sur l'histoire de France
Les enfants jouent au football dehors
Le colis est bien arrivé, merci
Nous partons en vacances en Bretagne cet été
La nouvelle version corrige le problème de connexion
Joyeux Noël et bonne année
C'est une bonne idée, faisons comme ça
La route sera réparée la semaine prochaine
Le restaurant du coin est très agréable
Bonne chance pour ton examen demain
Le marché est ouvert tous les mercredis
J'ai trouvé un appartement près de la gare
Le café de la place fait de bons croissants""".splitlines()


def everyday_other() -> list[Row]:
    rows = []
    for language, lines in (("de", DE_EVERYDAY), ("fr", FR_EVERYDAY)):
        rows += [Row(text, language, f"written-{language}", (), (), group=f"{language}-everyday-{k // 5:02d}",
                     functionality="everyday") for k, text in enumerate(lines)]
    return rows


def rows() -> list[Row]:
    return indonesian() + english() + everyday_other()
