package workload

import "strings"

// words is the text vocabulary, roughly in order of English word frequency,
// most frequent first: the Zipf draw picks low indices most often.
var words = strings.Fields(`
the of and to a in is that it for was on with as he be at by this had not are
but from or have an they which one you were all we her she there would their
his been has when if more will no so who can out its said what up about into
than them only some could time other these two may then do first any my now
such like our over man me even most made after also did many before must
through back years where much your way well down should because each just
those people how too little state good very make world still own see men work
long get here between both life being under never day same another know while
last might us great old year off come since against go came right used take
three states himself few house use during without again place around however
home small found thought went say part once general high upon school every
does got united left number course war until always away something fact though
water less public put think almost hand enough far took head yet government
system better set told nothing night end why called didn't eyes find going
look asked later point knew city next program business give group toward young
days let room president side social given present several order national
possible rather second face per among form important often things looking
early white case john become large big need four within felt along children
saw best church ever least power development light thing seemed family
interest want members mind country area others done turned although open god
service certain kind problem began different door thus help sense means whole
matter perhaps itself york times law human line above name example action
company hands local show whether five history gave today either act feet
across taken past quite anything seen having death week experience body word
half really field am car words already themselves information tell together
college shall money period held keep sure probably free seems political real
behind cannot miss question air office making brought whose special major
heard problems federal became study ago moment available known result street
economic boy position reason change south board individual job areas society
west close turn love community true court force full seem front wife future
age voice center woman control common necessary policy following father sound
usually questions private view building art market moved morning research
stood ground else women actually value million simply strong months paper
story hundred report meeting expected price river growth plan someone coffee
garden kitchen travel weather summer winter spring autumn music movie book
books restaurant hotel beach mountain island road train flight airport ticket
museum bridge station village harbor forest lake desert valley castle square
dinner breakfast lunch menu recipe bread cheese wine tea soup salad chicken
fish rice pasta sauce sugar butter chocolate fruit apple orange lemon tomato
potato onion garlic pepper salt oil oven pan plate glass bottle table chair
window wall floor bed lamp phone camera screen battery laptop keyboard
software update feature version release design quality material color size
weight delivery shipping package customer support staff manager team project
email account password network server database storage backup memory speed
performance issue error fix test build review rating star stars recommend
recommended excellent nice bad poor cheap expensive comfortable friendly
helpful clean quiet noisy busy slow fast easy hard simple tiny huge warm cold
hot fresh delicious tasty sweet bitter beautiful ugly pretty lovely amazing
awesome terrible awful perfect average decent solid reliable durable fragile
heavy dark bright soft loud modern classic visit visited stay stayed walk
walked drive drove eat ate drink cook cooked buy bought sell sold pay paid
wait waited arrive arrived leave return returned enjoy enjoyed liked hate
hated try tried read wrote write play played watch watched listen learned
learn teach taught built fixed break broke opened closed start started finish
finished move carry carried share shared check checked ordered planned expect
hope hoped worry worried forget forgot remember remembered decide decided
explain explained answer answered therefore meanwhile instead besides overall
honestly basically especially definitely certainly maybe sometimes rarely
quickly slowly carefully easily finally recently nearly mostly friend friends
parents kids dog cat neighbor guest host owner chef driver teacher student
doctor nurse engineer artist writer reader user users weekend holiday evening
afternoon tonight tomorrow yesterday hour hours minute minutes month season
trip journey tour views sunset
`)

// phrases are common multi-word expressions, mixed into the text as real
// prose repeats them.
var phrases = strings.Split(`of the|in the|to the|on the|and the|for the|at the|with the|from the|by the|it was|it is|there is|there was|one of the|as well as|a lot of|in front of|at the same time|on the other hand|at the end of the|for the first time|in the middle of|the rest of the|a little bit|more than|less than|as soon as|so that|even though|in order to|according to|as long as|at least|at first|in fact|of course|by the way|all the time|most of the|some of the|each other|in the morning|last year|next week|this time|every day|right now|a few|a couple of|not only|but also|would like to|going to|have to|need to|was able to|we will|I think|I would|you can|they were|it has been|would have been`, "|")
