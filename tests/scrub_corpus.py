"""Realistic support replies and questions full of personal data (issue 33 item 3): each with the names known to
its ticket, what must not survive scrubbing, and a phrase of the actual help that must."""

from __future__ import annotations

from typing import NamedTuple


class Case(NamedTuple):
    text: str
    names: tuple[str, ...]  # known to the ticket: the customer's From name, the agents' display names
    leaks: tuple[str, ...]
    kept: str


CORPUS = [
    Case("Hi Maria,\n\nI have refunded the duplicate charge on your card ending 4242. It shows in 3-5 business days."
         "\n\nBest,\nAgnes", ("Maria Lopez", "Agnes"), ("Maria", "Lopez", "4242", "Agnes"), "refunded the duplicate"),
    Case("Hi, Maria here. I was charged twice on my card ending 4242 for the same order.\nThanks,\nMaria Lopez",
         (), ("Maria", "Lopez", "4242"), "charged twice"),
    Case("Hello John,\n\nYour order #58231 left our warehouse today. Tracking number 1Z999AA10123456784.\n\n"
         "Kind regards,\nPriya Patel\nSupport Team", ("John Smith", "Priya Patel"),
         ("John", "58231", "1Z999AA10123456784", "Priya", "Patel"), "left our warehouse"),
    Case("Dear Mr. Okafor,\n\nWe have updated the shipping address to 221B Baker Street, London NW1 6XE.\n\n"
         "Sincerely,\nTom", ("Chidi Okafor",), ("Okafor", "221B", "Baker", "NW1 6XE", "Tom"),
         "updated the shipping address"),
    Case("Hey Sam! The invoice INV-2024-0042 was re-sent to sam.wu@example.org. Cheers, Lena",
         ("Sam Wu", "Lena Berg"), ("Sam", "INV-2024-0042", "sam.wu@example.org", "Lena"), "was re-sent"),
    Case("Hi Ana,\nI reset the password for account 7781230. You can log in now.\nThanks!\nBo",
         ("Ana Silva", "Bo Chen"), ("Ana", "7781230", "Bo"), "reset the password"),
    Case("Good morning Kevin,\n\nYou can call us back at +1 (415) 555-0132 any time between 9 and 5.\n\n"
         "Regards,\nMarta Nowak", ("Kevin Doyle", "Marta Nowak"), ("Kevin", "555-0132", "Marta", "Nowak"),
         "any time between 9 and 5"),
    Case("Hello,\nmy name is Fatima Zahra and my Visa card ending in 1881 was declined at checkout.\n"
         "My phone is 06 12 34 56 78.", (), ("Fatima", "Zahra", "1881", "06 12 34 56 78"), "declined at checkout"),
    Case("Hi Jürgen,\n\nthe replacement goes to Hauptstraße 12, 10115 Berlin this week.\n\nViele Grüße\n"
         "-- \nAgnes Müller\nSupport", ("Jürgen Weber", "Agnes Müller"),
         ("Jürgen", "Hauptstraße 12", "10115", "Agnes", "Müller"), "replacement goes to"),
    Case("Hi Emily,\n\nBooking confirmation ABX-77812 is cancelled and the refund of $49 is on its way to the "
         "Mastercard ending 5454.\n\nAll the best,\nRaj", ("Emily Clark", "Raj Kumar"),
         ("Emily", "ABX-77812", "5454", "Raj"), "refund of $49"),
    Case("Dear Customer,\nplease send the item to our returns center, PO Box 4410, Austin, TX 78701.\n"
         "Best regards\nHelen", ("Helen Ford",), ("4410", "78701", "Helen"), "returns center"),
    Case("Hi Luis, I've merged your two accounts (customer ID 88-1234-77) into one. Thanks, Agnes",
         ("Luis Garcia", "Agnes"), ("Luis", "88-1234-77", "Agnes"), "merged your two accounts"),
    Case("Hi there,\n\nThis is Olivia from billing. Your subscription SUB-99812 renews on the 1st.\n\n"
         "Thanks,\nOlivia", ("Olivia Reed",), ("Olivia", "SUB-99812"), "renews on the 1st"),
    Case("Hello Mrs. Nakamura,\n\nthe card on file (**** **** **** 0005) has expired, please update it under "
         "Billing.\n\nWarm regards,\nDavid", ("Yuki Nakamura", "David Lee"), ("Nakamura", "0005", "David"),
         "please update it under"),
    Case("Hi Pat,\nWe've sent a new code to +44 20 7946 0958. Please enter it within 10 minutes.\n- Agnes",
         ("Pat Kelly", "Agnes"), ("Pat", "7946 0958", "Agnes"), "enter it within 10 minutes"),
    Case("Hi Noah,\n\nYour parcel 4PX00012345678 is held at the depot at 500 Industrial Way, Suite 200, "
         "Denver, CO 80202.\n\nCheers,\nMia", ("Noah Brown", "Mia Wong"),
         ("Noah", "4PX00012345678", "500 Industrial", "80202", "Mia"), "held at the depot"),
    Case("Hello Grace,\nI cancelled order number 300-1234567-7654321 as you asked.\nBest, Tom",
         ("Grace Hopper", "Tom"), ("Grace", "300-1234567-7654321", "Tom"), "cancelled order"),
    Case("Dear Ahmed,\n\nthe last four digits 9921 match our records; the charge is genuine.\n\nRegards,\nSupport",
         ("Ahmed Ali",), ("Ahmed", "9921"), "match our records"),
    Case("Hi Chloe,\nplease reply from chloe.martin@example.fr so we can verify it's you.\nThanks, Agnes",
         ("Chloe Martin", "Agnes"), ("Chloe", "chloe.martin", "Agnes"), "verify it's you"),
    Case("Hi Ben,\n\nThe refund for transaction 4815162342 was issued.\n\nThank you,\nSara Lind\n"
         "Customer Support | Acme\n+1 212 555 0199", ("Ben Adams", "Sara Lind"),
         ("Ben", "4815162342", "Sara", "Lind", "555 0199"), "refund for transaction"),
    Case("Hello,\nI'm Carlos Mendez, account #A77120. My card xxxx-xxxx-xxxx-3141 keeps getting declined.",
         (), ("Carlos", "Mendez", "A77120", "3141"), "keeps getting declined"),
    Case("Hi Sophie,\n\nYour membership number is M-20931; show it at the desk.\n\nBest wishes,\nLiam",
         ("Sophie Turner", "Liam"), ("Sophie", "M-20931", "Liam"), "show it at the desk"),
    Case("Hi Omar,\nwe moved your delivery to 17 Rue de Rivoli, 75001 Paris.\nMerci,\nAgnes",
         ("Omar Haddad", "Agnes"), ("Omar", "17 Rue", "75001", "Agnes"), "moved your delivery"),
    Case("Hey Jess, quick update: RMA 55231 is approved. Ship it back with the label we e-mailed. Thanks! Dan",
         ("Jess Park", "Dan"), ("Jess", "55231", "Dan"), "is approved"),
    Case("Hi Ivan,\n\nYour case reference is REF-88412. An engineer will call you on 555-867-5309.\n\nBest,\n"
         "Agnes", ("Ivan Petrov", "Agnes"), ("Ivan", "REF-88412", "867-5309", "Agnes"), "An engineer will call"),
    Case("Dear Ms. Rossi,\nwe have sent the documents to 42 Via Roma Street, Milan.\nKind regards,\nMarco",
         ("Giulia Rossi", "Marco"), ("Rossi", "42 Via Roma", "Marco"), "sent the documents"),
    Case("Hi Hannah,\n\nthe Amex ending with 1005 was charged $12.99 for the monthly plan.\n\nThanks,\nAgnes",
         ("Hannah Lee", "Agnes"), ("Hannah", "1005", "Agnes"), "monthly plan"),
    Case("Hello Peter,\nI've added a note to account no. 55123987 so the late fee is waived.\nBest regards,\n"
         "Julia Schmidt\nBilling", ("Peter Novak", "Julia Schmidt"), ("Peter", "55123987", "Julia", "Schmidt"),
         "late fee is waived"),
    Case("Hi Zoe!\n\nOrder ZX-4410 is on its way and should arrive Friday.\n\nTalk soon,\nAgnes",
         ("Zoe Kim", "Agnes"), ("Zoe", "ZX-4410", "Agnes"), "should arrive Friday"),
    Case("Hi Michael,\nyour invoice number is 2024/0815; I attached a copy.\nBest,\nNina",
         ("Michael Ross", "Nina"), ("Michael", "2024/0815", "Nina"), "attached a copy"),
    Case("Dear Dr. Evans,\n\nthe replacement device ships from 1600 Amphitheatre Parkway, Mountain View, CA 94043."
         "\n\nYours sincerely,\nSupport", ("Rhys Evans",), ("Evans", "1600", "94043"), "replacement device"),
    Case("Hi Lucy,\n\nI can see two payments from the debit card ending in 7777; one is reversed.\n\nCheers,\n"
         "Agnes", ("Lucy Gray", "Agnes"), ("Lucy", "7777", "Agnes"), "one is reversed"),
    Case("Hello Kenji,\nYour user ID U-48213 has been unlocked.\nThanks,\nAgnes", ("Kenji Sato", "Agnes"),
         ("Kenji", "U-48213", "Agnes"), "has been unlocked"),
    Case("Hi Rosa,\n\nPlease call our billing line at (020) 7123 4567 and quote policy number PN-77120.\n\n"
         "Best,\nAgnes", ("Rosa Diaz", "Agnes"), ("Rosa", "7123 4567", "PN-77120", "Agnes"), "billing line"),
    Case("Hi Adam,\nThe courier will pick up from Flat 3, 10 Downing Street, London SW1A 2AA tomorrow.\n"
         "Best regards,\nAgnes", ("Adam Stone", "Agnes"), ("Adam", "10 Downing", "SW1A 2AA", "Agnes"),
         "courier will pick up"),
    Case("Hello Aisha, thanks for your patience. Your loyalty number L-99120 now has 500 points. Regards, Tom",
         ("Aisha Khan", "Tom"), ("Aisha", "L-99120", "Tom"), "500 points"),
    Case("Hi Victor,\n\nWe refunded receipt #88412 to the card ending 6011.\n\nBest,\nAgnes\nAcme Support\n"
         "agnes@acme.example", ("Victor Hugo", "Agnes"), ("Victor", "88412", "6011", "Agnes", "agnes@acme"),
         "We refunded receipt"),
    Case("Hi Elena,\nI've sent the new SIM to Apt 4B, 350 Fifth Avenue, New York, NY 10118.\nThanks,\nAgnes",
         ("Elena Popova", "Agnes"), ("Elena", "4B", "350 Fifth", "10118", "Agnes"), "sent the new SIM"),
    Case("Hello Tariq,\nyour contract number is C-7734-221; cancellation takes effect at the end of the month.\n"
         "Best,\nAgnes", ("Tariq Aziz", "Agnes"), ("Tariq", "C-7734-221", "Agnes"), "cancellation takes effect"),
    Case("Hi Nora,\n\nI've removed the card ending 2222 from your wallet as requested.\n\nAll the best,\n"
         "Agnes Smith\nTeam Lead", ("Nora Berg", "Agnes Smith"), ("Nora", "2222", "Agnes", "Smith"),
         "removed the card"),
    Case("Hi Felix,\nyour shipment 9400111899223856928499 is delayed by weather. Sorry about that!\nCheers, Agnes",
         ("Felix Wagner", "Agnes"), ("Felix", "9400111899223856928499", "Agnes"), "delayed by weather"),
    Case("Dear Lopez family,\n\nThe booking under reference BK-5512 is confirmed for 4 guests.\n\nRegards,\nAgnes",
         ("Maria Lopez", "Agnes"), ("Lopez", "BK-5512", "Agnes"), "confirmed for 4 guests"),
]
