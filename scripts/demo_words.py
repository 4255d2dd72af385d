"""Word lists and text templates for the demo model's synthetic training data.

Written for kor-cli; every entry is plain, made-up or common-knowledge vocabulary.
"""

from __future__ import annotations

FIRST_NAMES = """
Ada Alan Alice Amara Ana Andre Anna Arjun Ben Bianca Bruno Carla Chen Chloe Daniel Dara Diego
Elena Emil Emma Erik Fatima Felix Grace Hana Hugo Ines Ivan Jack James Jana Joao Julia Kai Kenji
Laura Leila Leo Lina Lucas Maria Marta Mateo Maya Mia Nadia Nina Noah Olga Omar Oscar Paula
Pedro Priya Rafael Rosa Ruth Sam Sara Sofia Tariq Tom Uma Victor Wei Yara Yusuf Zoe Liam Ingrid
""".split()

LAST_NAMES = """
Abbott Adeyemi Alvarez Becker Bennett Brown Castro Chen Costa Dubois Eriksen Evans Fischer
Garcia Gomez Hansen Hughes Ibrahim Ito Jensen Kaur Kim Kowalski Larsen Lee Lopez Martin Meyer
Moreau Murphy Nair Nakamura Novak Okafor Olsen Park Patel Perez Petrov Quinn Rossi Santos
Schmidt Silva Singh Smith Suzuki Tanaka Taylor Torres Weber Wilson Wong Yilmaz Young Zhang
Lindqvist Haddad Mendes Varga Popescu Kovacs
""".split()

# Syllables for invented names, so the model must copy names rather than recall them.
NAME_SYLLABLES = """
ka lo mi ra ten vo sa ri no be da el an to ma ju li ne fa ro ki su pe or ul ve zan mar tin
""".split()

CITIES = """
Paris|London|Leeds|Bristol|Valencia|Madrid|Lisbon|Porto|Hamburg|Berlin|Munich|Vienna|Zurich|
Geneva|Milan|Rome|Naples|Athens|Oslo|Bergen|Stockholm|Helsinki|Copenhagen|Dublin|Cork|
Edinburgh|Glasgow|Cardiff|Amsterdam|Utrecht|Brussels|Ghent|Prague|Krakow|Warsaw|Budapest|
Istanbul|Cairo|Lagos|Nairobi|Accra|Cape Town|Mumbai|Pune|Delhi|Karachi|Dhaka|Bangkok|Hanoi|
Manila|Jakarta|Singapore|Seoul|Busan|Tokyo|Osaka|Kyoto|Sydney|Perth|Auckland|Toronto|
Montreal|Vancouver|Chicago|Boston|Denver|Austin|San Diego|New York|Mexico City|Lima|Bogota|
Santiago|Buenos Aires|Rio de Janeiro|Sao Paulo|Quito|Tunis|Casablanca|Tbilisi|Riga
""".replace("\n", "").split("|")

JOBS = """
nurse|teacher|baker|software developer|carpenter|pharmacist|journalist|chef|architect|
bus driver|photographer|lawyer|gardener|librarian|electrician|translator|dentist|farmer
""".replace("\n", "").split("|")

BUSINESSES = "bakery|bookshop|bike shop|small cafe|flower stall|barber shop|yoga studio".split("|")

ZH_SURNAMES = list("王李张刘陈杨黄赵吴周徐孙马朱胡郭何林罗高郑梁谢宋唐许韩冯邓曹彭曾")
ZH_GIVEN = list("伟芳娜敏静丽强磊军洋勇艳杰娟涛明超秀霞平刚桂英") + list(
    "华玉兰红建国文辉鹏飞宇婷雪琳晨欣浩然"
)
ZH_CITIES = (
    "北京 上海 广州 深圳 杭州 南京 成都 重庆 武汉 西安 苏州 天津 长沙 青岛 厦门 昆明 大连 郑州"
).split()
ZH_JOBS = "医生 老师 工程师 设计师 厨师 护士 律师 程序员 会计 司机".split()

PERSON_TEMPLATES = [
    "{name} is {age} and lives in {city}.",
    "Hi, I'm {name}. I turned {age} last month and I've lived in {city} since {year}.",
    "{name} ({age}) runs a {business} in {city}.",
    "Our new intern, {name}, is {age} and commutes from a flat in {city} every day.",
    "Meet {name}, a {age}-year-old {job} based in {city}.",
    "{name}, {age}, {city}.",
    "Name: {name}\nAge: {age}\nCity: {city}",
    "My neighbour {name} just turned {age}. They have lived in {city} all their life.",
    "{name} moved from {other_city} to {city} in {year}. Now {name} is {age}.",
    "At {age}, {name} still cycles to work across {city} every morning.",
    "Contact: {name} | age {age} | lives in {city}",
    "I am {name}, {age} years old, from {city}.",
    "Dear team, this is {name} writing from {city}. I'm {age} and would like to join the club.",
    "Profile: {name}, {age} years, living in {city}, works as a {job}.",
    "Applicant {name} (age {age}) currently resides in {city}.",
    "{name} is a {job} in {city}. She is {age}.",
    "{name} is a {job} in {city}. He is {age}.",
    "Born in {other_city}, {name} ({age}) now calls {city} home.",
    "Hello! {name} here, {age}, writing to you from {city}.",
    "The {job} {name}, aged {age}, lives in {city} with two cats.",
]
PERSON_TEMPLATES_ZH = [
    "{name}今年{age}岁，住在{city}。",
    "我叫{name}，{age}岁，来自{city}。",
    "{name}，{age}岁，现居{city}，是一名{job}。",
    "大家好，我是{name}，今年{age}岁，在{city}工作和生活。",
    "{name}是{city}的一名{job}，今年{age}岁。",
]

# Weather: (city as asked, location as the tool wants it, unit inferred from the place).
WEATHER_US = """
Boston:MA Seattle:WA Chicago:IL Denver:CO Austin:TX Miami:FL Phoenix:AZ Atlanta:GA Portland:OR
Nashville:TN Dallas:TX Houston:TX Detroit:MI Orlando:FL Honolulu:HI Anchorage:AK Buffalo:NY
Cleveland:OH Memphis:TN Omaha:NE
""".split()
WEATHER_US_TWO_WORDS = [
    ("San Francisco", "CA"),
    ("Los Angeles", "CA"),
    ("New York", "NY"),
    ("Las Vegas", "NV"),
    ("Salt Lake City", "UT"),
    ("San Diego", "CA"),
]
WEATHER_WORLD = """
Hamburg:Germany Berlin:Germany Munich:Germany Paris:France Lyon:France London:UK
Manchester:UK Madrid:Spain Seville:Spain Rome:Italy Milan:Italy Vienna:Austria
Zurich:Switzerland Oslo:Norway Stockholm:Sweden Helsinki:Finland Dublin:Ireland
Lisbon:Portugal Athens:Greece Warsaw:Poland Prague:Czechia Toronto:Canada Vancouver:Canada
Sydney:Australia Melbourne:Australia Tokyo:Japan Osaka:Japan Seoul:Korea Mumbai:India
Delhi:India Cairo:Egypt Nairobi:Kenya Lima:Peru Santiago:Chile Auckland:New_Zealand
Reykjavik:Iceland Bangkok:Thailand Istanbul:Turkey
""".split()
WEATHER_ZH = {
    "北京": "Beijing",
    "上海": "Shanghai",
    "广州": "Guangzhou",
    "深圳": "Shenzhen",
    "成都": "Chengdu",
    "杭州": "Hangzhou",
    "西安": "Xi'an",
    "武汉": "Wuhan",
}

WEATHER_TEMPLATES = [
    "What's the weather like in {city} right now?",
    "Is it cold in {city} right now? Should I bring a jacket?",
    "How hot is it in {city} today?",
    "Can you check the current weather in {city}?",
    "I'm flying to {city} tonight. What's it like there?",
    "Tell me the temperature in {city}.",
    "Current conditions in {city}, please.",
    "weather {city}",
    "Do I need an umbrella in {city} at the moment?",
    "Wie warm ist es gerade in {city}?",
    "Quel temps fait-il à {city} en ce moment ?",
    "¿Qué tiempo hace ahora en {city}?",
]
WEATHER_OPENERS = ["", "", "", "Hey, ", "Quick question: ", "Hi! ", "Assistant, ", "Morning! "]
WEATHER_CLOSERS = ["", "", "", " Thanks!", " Please.", " I'm heading out soon.", " Cheers."]
WEATHER_TEMPLATES_UNIT = [
    "What's the temperature in {city} in {unit}?",
    "Give me the current weather in {city}, in {unit} please.",
    "How warm is {city} right now? Answer in {unit}.",
]
UNIT_WORDS = {
    "celsius": ["Celsius", "degrees Celsius", "°C"],
    "fahrenheit": ["Fahrenheit", "degrees Fahrenheit", "°F"],
}
WEATHER_TEMPLATES_ZH = [
    "{city}现在天气怎么样？",
    "{city}今天冷不冷？",
    "帮我查一下{city}现在的气温。",
]

# Receipts.
SHOP_WORDS_A = "GREEN CORNER BLUE GOLDEN SUNNY OLD NORTH LITTLE RED URBAN MAPLE HAPPY".split()
SHOP_WORDS_B = "LEAF BAKERY DOOR OAK HARBOUR MILL GARDEN BRIDGE LANTERN FIELD STAR RIVER".split()
SHOP_KINDS = "MARKET CAFE DELI GROCERY STORE KITCHEN PANTRY SHOP FOODS".split()
ITEMS = """
Apple|Banana|Oat milk 1L|Rye bread|Croissant|Coffee|Tea|Orange juice|Eggs 6pk|Butter|Cheddar|
Yogurt|Tomatoes|Potatoes 2kg|Onions|Rice 1kg|Pasta|Olive oil|Chocolate bar|Muffin|Bagel|
Sandwich|Soup of the day|Latte|Cappuccino|Water 500ml|Lemonade|Salad bowl|Avocado|Carrots|
Chicken breast|Salmon fillet|Honey|Jam|Cereal|Notebook|Pen|Batteries AA|Soap|Toothpaste|
Shampoo|Paper towels|Flowers|Lemon cake|Cookie|Green tea|Hummus|Spinach|Mushrooms|Grapes
""".replace("\n", "").split("|")
CURRENCIES = {"EUR": "€", "USD": "$", "GBP": "£", "CHF": "", "SEK": "", "CAD": ""}
RECEIPT_FOOTERS = [
    "Thank you for shopping with us!",
    "Have a nice day",
    "No refunds without receipt",
    "Card payment",
    "VAT included",
    "",
]

# Restaurant reviews: aspect → things that are judged under it.
REVIEW_SUBJECTS = {
    "菜品": "牛肉 烤鸭 汤底 饺子 面条 甜点 鱼 米饭 小龙虾 羊肉串 味道 菜 火锅 包子 炒饭".split(),
    "服务": "服务员 服务 老板 上菜速度 店员 服务态度".split(),
    "环境": "环境 装修 店里 座位 卫生 氛围".split(),
    "价格": "价格 价钱 性价比 菜价".split(),
    "等待": "排队时间 等位 上菜时间".split(),
}
REVIEW_OPINIONS = {  # aspect → sentiment → opinion phrases that fit it
    "菜品": {
        "positive": "很新鲜 很香 特别好吃 很地道 不错 非常棒 很入味".split(),
        "negative": "太咸了 不新鲜 难吃 太油了 凉了 很一般".split(),
        "neutral": "一般 还行 中规中矩 普通".split(),
    },
    "服务": {
        "positive": "很热情 很周到 很快 非常好 很耐心".split(),
        "negative": "不太热情 很慢 态度很差 爱理不理 太慢了".split(),
        "neutral": "一般 还可以 马马虎虎".split(),
    },
    "环境": {
        "positive": "很干净 很安静 很舒服 很有格调 不错".split(),
        "negative": "很吵 很脏 太挤了 很乱 有点暗".split(),
        "neutral": "一般 还行 普通".split(),
    },
    "价格": {
        "positive": "很实惠 挺划算 很便宜 合理".split(),
        "negative": "太贵了 偏高 不值 有点贵".split(),
        "neutral": "一般 还可以 中等".split(),
    },
    "等待": {
        "positive": "很短 很快 不用等".split(),
        "negative": "太长了 太久了 很慢 要一个小时".split(),
        "neutral": "还行 一般 可以接受".split(),
    },
}
REVIEW_OPENERS = [
    "", "", "这家店的", "这家火锅店的", "这家餐厅的", "昨天去吃了，", "朋友推荐的店，",
]  # fmt: skip
REVIEW_LINKS = ["，", "，但是", "，不过", "，而且", "，就是", "，另外"]
REVIEW_ADVERBS = ["", "", "", "也", "都"]
REVIEW_ENDINGS = ["。", "。", "！", "。总的来说还行。", "～"]
